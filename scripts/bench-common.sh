# Sourced by the benchmarks (not run by itself): what several of them do
# alike, so that two benchmarks comparing with "the relay's own statements"
# or printing "a median of pairs" mean the same thing.

# relay_pgbench_scripts RELAY DIR: writes DIR/claim_mark.sql (claim, then
# mark: two round trips, two commits per batch) and DIR/mark_claim.sql (the
# mark of the batch before and the next claim as one query string: one
# commit, what the relay does while a backlog drains), the relay's own
# statements (`outbox-relay --print-sql`) with its placeholders turned into
# pgbench variables :wid, :batch, :lease and :ids.  pgbench must run them
# with -M simple: its extended mode would take the ':MI' and ':SS' inside
# the statements' to_char formats for variables.
relay_pgbench_scripts() {
  local relay=$1 dir=$2 claim_sql mark_sql
  claim_sql=$("$relay" --print-sql claim)
  mark_sql=$("$relay" --print-sql mark)
  local claim_sub="s/\\\$1::uuid/':wid'::uuid/g; s/\\\$2::int/:batch::int/g; s/\\\$3::bigint/:lease::bigint/g; s/\\\$4::uuid/':wid'::uuid/g"
  local mark_sub="s/\\\$1::uuid\\[\\]/':ids'::uuid[]/g; s/\\\$2::uuid/':wid'::uuid/g"
  {
    # The claim's result folded into one variable, so that the mark can use
    # the ids, as the relay does.
    echo "WITH claimed AS ("
    sed -e "$claim_sub" <<<"$claim_sql"
    echo ") SELECT coalesce(array_agg(id)::text, '{}') AS ids FROM claimed \\gset"
    sed -e "$mark_sub" <<<"$mark_sql"
    echo ";"
  } >"$dir/claim_mark.sql"
  {
    sed -e "$mark_sub" <<<"$mark_sql"
    echo "\\;"
    echo "WITH claimed AS ("
    sed -e "$claim_sub" <<<"$claim_sql"
    echo ") SELECT coalesce(array_agg(id)::text, '{}') AS ids FROM claimed \\gset"
  } >"$dir/mark_claim.sql"
}

# pairs_summary LABEL RATIO...: one line, "LABEL: median M of N pairs, LO to
# HI, spread S%", and a warning when the spread ((HI - LO) / M) is over 15%:
# a benchmark that runs ceiling and subject alternately moves both sides of
# a pair with the machine's drift, so pairs that still disagree that much say
# the rounds were too short for this machine's noise, or the machine too busy,
# for the figure to be trusted.
pairs_summary() {
  local label=$1
  shift
  printf "%s\n" "$@" | sort -g | awk -v label="$label" '
    { v[NR] = $1 }
    END {
      med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      spread = med > 0 ? (v[NR] - v[1]) / med : 0
      printf "%s: median %.2f of %d pair%s, %.2f to %.2f, spread %.0f%%%s\n", label, med, NR,
             NR == 1 ? "" : "s", v[1], v[NR], 100 * spread,
             (spread > 0.15 ? " (too wide to trust: longer or more rounds, or a quieter machine)" : "") }'
}

# pairs_median RATIO...: the median alone, for a verdict against a goal.
pairs_median() {
  printf "%s\n" "$@" | sort -g | awk '{ v[NR] = $1 }
    END { printf "%.3f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---- CPU accounting: clock ticks from /proc, read before and after a run.
# cpu_ticks_of PIDS...: their utime+stime and their reaped children's.
cpu_ticks_of() {
  local p
  for p in "$@"; do awk '{ print $14 + $15 + $16 + $17 }' "/proc/$p/stat" 2>/dev/null || true; done |
    awk '{ s += $1 } END { print s + 0 }'
}
# cpu_pg_ticks CLUSTER: every process of a pg-cluster: the postmaster and its children.
cpu_pg_ticks() {
  local pm
  pm=$(head -1 "$1/data/postmaster.pid")
  # shellcheck disable=SC2046
  cpu_ticks_of "$pm" $(ps -o pid= --ppid "$pm")
}
# cpu_machine_ticks: "all idle" of the whole machine (idle with iowait).
cpu_machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5 + $6 }' /proc/stat; }

# cpu_report MESSAGES "BEFORE" "AFTER" LABEL...: one line of CPU ms per
# 1,000 messages, where BEFORE and AFTER are "all idle G1 G2..." (the
# machine's ticks, then each group's, as cpu_machine_ticks and cpu_ticks_of
# give them) and each LABEL names a group: "LABEL1 x, LABEL2 y, rest r,
# idle i".  The rest is what no group ran (the kernel, pgbench, the
# script).  A process's time is the scheduler's exact count, /proc/stat's is
# sampled at each tick: the rest can come out a tick or two below zero,
# which says it is nothing, and is shown as 0.
cpu_report() {
  local n=$1 a=$2 b=$3
  shift 3
  awk -v n="$n" -v hz="$(getconf CLK_TCK)" -v a="$a" -v b="$b" -v labels="$*" 'BEGIN {
    split(a, x, " "); split(b, y, " "); ng = split(labels, l, " ")
    k = 1000 / hz * 1000 / n                     # ticks -> CPU ms per 1,000 messages
    all = y[1] - x[1]; idle = y[2] - x[2]; rest = all - idle
    line = "CPU ms per 1,000 msgs:"
    for (g = 1; g <= ng; g++) {
      t = y[g + 2] - x[g + 2]; rest -= t
      line = line sprintf(" %s %.0f,", l[g], t * k)
    }
    printf "%s rest %.0f, idle %.0f\n", line, (rest > 0 ? rest : 0) * k, idle * k }'
}

# cpu_bound MESSAGES "BEFORE" "AFTER": the most messages a second this
# machine's cores could carry at the busy CPU time this run took per
# message (all cores busy, none idle, the same work): what the run could
# reach had nothing waited.
cpu_bound() {
  awk -v n="$1" -v hz="$(getconf CLK_TCK)" -v a="$2" -v b="$3" -v cores="$(nproc)" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    busy = (y[1] - x[1]) - (y[2] - x[2])
    printf "%.0f\n", (busy > 0 ? cores * hz * n / busy : 0) }'
}

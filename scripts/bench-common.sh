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

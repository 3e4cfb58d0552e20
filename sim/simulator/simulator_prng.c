/* simulator_prng.c -- the simulator's one source of randomness: xoshiro256**
 * seeded through splitmix64 from (seed, run); see simulator.h.
 *
 * Every draw of generation goes through it in a fixed order; nothing else
 * (clock, environment, hash order) influences a plan, so run I of seed S is
 * the same schedule on every machine and every replay. */
#include "simulator.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void sim_rng_init(struct sim_rng *r, uint64_t seed, uint64_t run)
{
    /* The run index goes through its own splitmix step before it meets the
     * seed, so (S, I) and (S + 1, I - 1) do not collide. */
    uint64_t x = run;
    uint64_t mixed = seed ^ splitmix64(&x);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&mixed);
}

uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

int sim_rng_below(struct sim_rng *r, int n)
{
    if (n < 1)
        return 0;
    /* Rejection keeps it unbiased; the loop ends with probability 1 and in
     * practice at once (n is tiny next to 2^64). */
    uint64_t bound = (uint64_t)n;
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t v;
    do {
        v = sim_rng_next(r);
    } while (v >= limit);
    return (int)(v % bound);
}

int sim_rng_range(struct sim_rng *r, int lo, int hi)
{
    if (hi < lo)
        return lo;
    return lo + sim_rng_below(r, hi - lo + 1);
}

int sim_rng_chance(struct sim_rng *r, int percent)
{
    return sim_rng_below(r, 100) < percent;
}

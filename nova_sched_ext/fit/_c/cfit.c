/*
 * nova-sched-ext NUMA fit engine (C helper).
 *
 * Replays nova.virt.hardware.numa_fit_instance_to_host step by step, like
 * nova_sched_ext/fit/pyfit.py (the reference twin: read its docstrings for
 * the why of each step; the two must stay in lockstep).
 *
 * Safety: every record is bounds-checked against the buffer length before it
 * is read, every count against the NSE_MAX_* limits; all working memory is
 * on the stack with fixed sizes; nothing is allocated.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cfit.h"

#define PIN_NONE 0
#define PIN_EMPTY 1
#define PIN_SOME 2

/* Nova's cache of (host cell id, instance cell id) pairs. */
#define CACHE_UNKNOWN 0
#define CACHE_FIT 1
#define CACHE_NOT_FIT 2
#define MAX_CACHE (NSE_MAX_CELLS * 2 * NSE_MAX_CELLS)

struct pair_cache {
    int n;
    int32_t host_id[MAX_CACHE];
    int32_t inst_id[MAX_CACHE];
    unsigned char state[MAX_CACHE];
};

struct search {
    const struct nse_host *host;
    const struct nse_host_cell *cells;     /* host order */
    const struct nse_request *req;
    const int64_t *pci;                    /* this host's record or NULL */
    int order[NSE_MAX_CELLS];              /* Nova's try order */
    int perm[NSE_MAX_CELLS];
    int used[NSE_MAX_CELLS];
    int32_t inst_id[NSE_MAX_CELLS];        /* mutable, as in Nova */
    int64_t pagesize[NSE_MAX_CELLS];       /* mutable, as in Nova */
    /* index of the host cell each instance cell's pinning was computed in
     * (the last pack_onto_cores that succeeded for it), -1 for none */
    int pinned_in[NSE_MAX_CELLS];
    struct pair_cache cache;
};

static int cache_get(const struct pair_cache *c, int32_t h, int32_t i)
{
    int k;
    for (k = 0; k < c->n; k++)
        if (c->host_id[k] == h && c->inst_id[k] == i)
            return c->state[k];
    return CACHE_UNKNOWN;
}

static void cache_put(struct pair_cache *c, int32_t h, int32_t i, int state)
{
    /* A full cache only loses memoisation, never correctness: an absent
     * entry is recomputed with the same inputs.  But Nova's answer depends on
     * cached entries (ids collide), so the cache is sized to never fill:
     * at most n_host_cells * (distinct instance ids) pairs exist. */
    if (c->n < MAX_CACHE) {
        c->host_id[c->n] = h;
        c->inst_id[c->n] = i;
        c->state[c->n] = (unsigned char)state;
        c->n++;
    }
}

static int can_fit_pagesize(const struct nse_host_cell *cell, int64_t size_kb,
                            int64_t memory_kb, int use_free)
{
    int p;
    for (p = 0; p < cell->n_pages; p++) {
        if (cell->page_size_kb[p] == size_kb) {
            int64_t pages = use_free
                ? cell->page_total[p] - cell->page_used[p]
                  - cell->page_reserved[p]
                : cell->page_total[p];
            return memory_kb <= pages * size_kb && memory_kb % size_kb == 0;
        }
    }
    return 0;
}

/* Nova's _numa_cell_supports_pagesize_request: chosen size or 0. */
static int64_t pick_page_size(const struct nse_host_cell *cell,
                              int64_t pagesize, int64_t memory_kb)
{
    int64_t sizes[NSE_MAX_PAGE_SIZES];
    int n = cell->n_pages, i, j, first, last;

    if (pagesize > 0)
        return can_fit_pagesize(cell, pagesize, memory_kb, 1) ? pagesize : 0;
    /* sort a copy, largest first */
    for (i = 0; i < n; i++)
        sizes[i] = cell->page_size_kb[i];
    for (i = 1; i < n; i++) {
        int64_t v = sizes[i];
        for (j = i - 1; j >= 0 && sizes[j] < v; j--)
            sizes[j + 1] = sizes[j];
        sizes[j + 1] = v;
    }
    first = 0;
    last = n;                  /* exclusive */
    if (pagesize == NSE_PAGESIZE_SMALL)
        first = n > 0 ? n - 1 : 0;
    else if (pagesize == NSE_PAGESIZE_LARGE)
        last = n > 0 ? n - 1 : 0;
    for (i = first; i < last; i++)
        if (can_fit_pagesize(cell, sizes[i], memory_kb, 1))
            return sizes[i];
    return 0;
}

static int pinning(int64_t threads, int64_t sets, int64_t wanted)
{
    if (threads * sets < wanted)
        return PIN_NONE;
    return wanted ? PIN_SOME : PIN_EMPTY;
}

static int reserved_ok(int reserved, int pin, int64_t left)
{
    if (!reserved)
        return 1;
    return pin == PIN_SOME && left > 0;
}

/* Nova's _pack_instance_onto_cores, reduced to "does it succeed". */
static int pack_onto_cores(const struct nse_host_cell *cell, int64_t wanted,
                           int reserved, int thread_policy)
{
    int64_t at_least[NSE_HIST_LEN + 1];
    int64_t total_free = 0;
    int largest = 0, t, pin;
    int tpc = cell->threads_per_core;

    at_least[NSE_HIST_LEN] = 0;
    for (t = NSE_MAX_THREADS; t >= 1; t--) {
        int64_t count = cell->free_sibling_hist[t];
        at_least[t] = at_least[t + 1] + count;
        total_free += count * t;
        if (count > 0 && largest == 0)
            largest = t;
    }

    if (thread_policy == NSE_THREAD_ISOLATE) {
        if (largest < tpc)
            return 0;
        if (tpc != 1 && !cell->pcpus_are_cpus)
            return 0;
        pin = pinning(1, at_least[tpc], wanted);
        return pin == PIN_SOME &&
               reserved_ok(reserved, pin, total_free - wanted * tpc);
    }

    if (thread_policy == NSE_THREAD_REQUIRE && tpc <= 1)
        return 0;
    pin = PIN_NONE;
    for (t = largest; t >= 1; t--) {
        if (thread_policy == NSE_THREAD_REQUIRE && t <= 1)
            continue;
        pin = pinning(t, at_least[t], wanted);
        if (pin == PIN_NONE ||
                !reserved_ok(reserved, pin, total_free - wanted))
            continue;
        break;
    }
    if (thread_policy != NSE_THREAD_REQUIRE && pin != PIN_SOME)
        pin = pinning(1, total_free, wanted);
    return pin != PIN_NONE && reserved_ok(reserved, pin, total_free - wanted);
}

/* Nova's _numa_fit_instance_cell; may update *pagesize like Nova does.
 * *pinned is set when Nova's _pack_instance_onto_cores succeeded: Nova
 * gives the instance cell the host cell's id there, and a mixed cell keeps
 * that id when its shared-CPU limits fail afterwards. */
static int fit_cell(const struct nse_host *host,
                    const struct nse_host_cell *cell,
                    const struct nse_request_cell *req, int64_t *pagesize,
                    int reserved, int *pinned)
{
    int dedicated = req->cpu_policy == NSE_CPU_DEDICATED ||
                    req->cpu_policy == NSE_CPU_MIXED;
    int shared = req->cpu_policy == NSE_CPU_SHARED ||
                 req->cpu_policy == NSE_CPU_MIXED;
    int64_t memory_kb = req->memory * 1024;

    *pinned = 0;
    if (*pagesize) {
        int64_t chosen = pick_page_size(cell, *pagesize, memory_kb);
        if (!chosen)
            return 0;
        *pagesize = chosen;
    } else if (cell->n_pages > 0) {
        int64_t smallest = cell->page_size_kb[0];
        int p;
        for (p = 1; p < cell->n_pages; p++)
            if (cell->page_size_kb[p] < smallest)
                smallest = cell->page_size_kb[p];
        if (!can_fit_pagesize(cell, smallest, memory_kb, dedicated))
            return 0;
    } else if (dedicated) {
        if (cell->memory - cell->memory_usage < req->memory)
            return 0;
    } else if (cell->memory < req->memory) {
        return 0;
    }

    if (dedicated && (int64_t)req->pcpus + reserved > cell->pcpus)
        return 0;
    if (shared && req->cpus > cell->cpus)
        return 0;
    if (dedicated) {
        if ((int64_t)req->pcpus + reserved > cell->free_pcpus)
            return 0;
        if (!pack_onto_cores(cell, req->pcpus, reserved, req->thread_policy))
            return 0;
        *pinned = 1;
    }
    if (shared && host->has_limits) {
        if ((double)((int64_t)cell->cpu_usage + req->cpus) >
                (double)cell->cpus * host->cpu_allocation_ratio)
            return 0;
        if ((double)(cell->memory_usage + req->memory) >
                (double)cell->memory * host->ram_allocation_ratio)
            return 0;
    }
    return 1;
}

/* Python's list.sort(key=..., reverse=...) is stable in both directions:
 * an insertion sort that moves an element only past strictly
 * smaller (or, reversed, strictly greater) keys does the same. */
static void stable_sort(int *order, int n, const int64_t *key, int reverse)
{
    int i, j;
    for (i = 1; i < n; i++) {
        int v = order[i];
        for (j = i - 1; j >= 0; j--) {
            int64_t a = key[order[j]], b = key[v];
            if (reverse ? (a < b) : (a > b))
                order[j + 1] = order[j];
            else
                break;
        }
        order[j + 1] = v;
    }
}

static void order_cells(struct search *s)
{
    int n = s->host->n_cells, i;
    int64_t key[NSE_MAX_CELLS];
    int pack = s->req->pack != 0;

    memset(key, 0, sizeof(key));
    for (i = 0; i < n; i++)
        s->order[i] = i;
    if (n <= s->req->n_cells)
        return;
    for (i = 0; i < n; i++)
        key[i] = s->cells[i].memory - s->cells[i].memory_usage;
    stable_sort(s->order, n, key, !pack);
    if (s->req->cells[0].cpu_policy == NSE_CPU_SHARED) {
        for (i = 0; i < n; i++)
            key[i] = s->cells[i].cpu_usage;
        stable_sort(s->order, n, key, pack);
    } else {
        for (i = 0; i < n; i++)
            key[i] = s->cells[i].free_pcpus;
        stable_sort(s->order, n, key, !pack);
    }
    if (s->host->has_pci_stats) {
        for (i = 0; i < n; i++)
            key[i] = s->cells[i].pci_devices;
        stable_sort(s->order, n, key, s->req->has_pci_requests != 0);
    }
}

static int pci_fits(const struct search *s)
{
    const struct nse_request *req = s->req;
    int n = s->host->n_cells, k;
    const int64_t *matching = s->pci + 1, *eligible = s->pci + 1 + n;
    int64_t matching_no_numa = s->pci[1 + 2 * n];
    int64_t eligible_no_numa = s->pci[2 + 2 * n];
    int64_t eligible_all = s->pci[3 + 2 * n];
    int64_t m = 0, e = 0, wanted = req->pci_count;

    for (k = 0; k < req->n_cells; k++) {
        m += matching[s->perm[k]];
        e += eligible[s->perm[k]];
    }
    if (req->pci_policy == NSE_PCI_REQUIRED || m >= wanted)
        return e >= wanted;
    if (req->pci_policy == NSE_PCI_LEGACY || m + matching_no_numa >= wanted)
        return e + eligible_no_numa >= wanted;
    return eligible_all >= wanted;
}

/* One permutation, evaluated from its first position as Nova does. */
static int try_permutation(struct search *s)
{
    const struct nse_request *req = s->req;
    int pos;

    for (pos = 0; pos < req->n_cells; pos++) {
        const struct nse_host_cell *cell = &s->cells[s->perm[pos]];
        int state = cache_get(&s->cache, cell->id, s->inst_id[pos]);
        int reserved, pinned;

        if (state == CACHE_NOT_FIT)
            return 0;
        if (state == CACHE_FIT) {
            s->inst_id[pos] = cell->id;
            continue;
        }
        reserved = (req->emulator_threads_isolated && pos == 0) ? 1 : 0;
        if (!fit_cell(s->host, cell, &req->cells[pos], &s->pagesize[pos],
                      reserved, &pinned)) {
            /* cached under the old id; a pinned mixed cell leaves with the
             * new one (pyfit._fit_once) */
            cache_put(&s->cache, cell->id, s->inst_id[pos], CACHE_NOT_FIT);
            if (pinned) {
                s->inst_id[pos] = cell->id;
                s->pinned_in[pos] = s->perm[pos];
            }
            return 0;
        }
        if (pinned)
            s->pinned_in[pos] = s->perm[pos];
        cache_put(&s->cache, cell->id, s->inst_id[pos], CACHE_FIT);
        s->inst_id[pos] = cell->id;
    }
    if (req->has_pci && !pci_fits(s))
        return 0;
    return 1;
}

/* k-permutations of s->order in itertools.permutations order. */
static int permute(struct search *s, int depth)
{
    int n = s->host->n_cells, i;

    if (depth == s->req->n_cells)
        return try_permutation(s);
    for (i = 0; i < n; i++) {
        if (s->used[i])
            continue;
        s->used[i] = 1;
        s->perm[depth] = s->order[i];
        if (permute(s, depth + 1)) {
            s->used[i] = 0;
            return 1;
        }
        s->used[i] = 0;
    }
    return 0;
}

static int64_t permutations(int n, int k)
{
    int64_t total = 1;
    int i;
    for (i = 0; i < k; i++) {
        total *= n - i;
        if (total > NSE_MAX_PERMUTATIONS)
            return total;
    }
    return total;
}

/* 0 < ratio <= max; written so that NaN is out of range */
static int ratio_ok(double ratio)
{
    return ratio > 0.0 && ratio <= NSE_MAX_ALLOCATION_RATIO;
}

/* a slot weight: finite and not negative (NaN is neither) */
static int weight_ok(double weight)
{
    return weight >= 0.0 && weight <= DBL_MAX;
}

static int amount_ok(int64_t v)
{
    return v >= 0 && v <= NSE_MAX_AMOUNT;
}

static int cpus_ok(int32_t v)
{
    return v >= 0 && v <= NSE_MAX_CPUS;
}

static int check_request(const struct nse_request *req)
{
    int i;
    if (req->n_cells < 0 || req->n_cells > NSE_MAX_CELLS)
        return 0;
    for (i = 0; i < req->n_cells; i++) {
        const struct nse_request_cell *c = &req->cells[i];
        if (!cpus_ok(c->cpus) || !cpus_ok(c->pcpus) || !amount_ok(c->memory))
            return 0;
        if (c->pagesize > NSE_MAX_PAGE_SIZE_KB)
            return 0;
        if (c->cpu_policy < NSE_CPU_SHARED || c->cpu_policy > NSE_CPU_MIXED)
            return 0;
        if (c->thread_policy < NSE_THREAD_PREFER ||
                c->thread_policy > NSE_THREAD_ISOLATE)
            return 0;
        if (c->pagesize < NSE_PAGESIZE_ANY)
            return 0;
    }
    if (req->has_pci && (req->pci_policy < NSE_PCI_LEGACY ||
                         req->pci_policy > NSE_PCI_PREFERRED ||
                         req->pci_count < 0))
        return 0;
    return 1;
}

static int check_cell(const struct nse_host_cell *c)
{
    int64_t sets;
    int t;
    if (c->n_pages < 0 || c->n_pages > NSE_MAX_PAGE_SIZES)
        return 0;
    if (c->threads_per_core < 1 || c->threads_per_core > NSE_MAX_THREADS)
        return 0;
    if (!amount_ok(c->memory) || !amount_ok(c->memory_usage) ||
            c->pci_devices < 0)
        return 0;
    if (!cpus_ok(c->cpus) || !cpus_ok(c->pcpus) || !cpus_ok(c->free_pcpus) ||
            !cpus_ok(c->cpu_usage))
        return 0;
    sets = 0;
    for (t = 0; t <= NSE_MAX_THREADS; t++) {
        /* no set has more free threads than a core has threads */
        if (c->free_sibling_hist[t] < 0 ||
                (t > c->threads_per_core && c->free_sibling_hist[t] != 0))
            return 0;
        sets += c->free_sibling_hist[t];
    }
    if (sets > NSE_MAX_CPUS)
        return 0;
    for (t = 0; t < c->n_pages; t++)
        if (c->page_size_kb[t] <= 0 ||
                c->page_size_kb[t] > NSE_MAX_PAGE_SIZE_KB ||
                !amount_ok(c->page_total[t]) || !amount_ok(c->page_used[t]) ||
                !amount_ok(c->page_reserved[t]))
            return 0;
    return 1;
}

static int check_host_head(const struct nse_host *host)
{
    if (host->n_cells < 0 || host->n_cells > NSE_MAX_CELLS ||
            host->candidates < 0 || host->candidates > NSE_MAX_CANDIDATES)
        return 0;
    if (host->has_limits && (!ratio_ok(host->cpu_allocation_ratio) ||
                             !ratio_ok(host->ram_allocation_ratio)))
        return 0;
    if (host->total_vcpus < -NSE_MAX_AMOUNT ||
            host->total_vcpus > NSE_MAX_AMOUNT ||
            host->free_vcpus < -NSE_MAX_AMOUNT ||
            host->free_vcpus > NSE_MAX_AMOUNT ||
            host->total_memory_mb < -NSE_MAX_AMOUNT ||
            host->total_memory_mb > NSE_MAX_AMOUNT ||
            host->free_memory_mb < -NSE_MAX_AMOUNT ||
            host->free_memory_mb > NSE_MAX_AMOUNT)
        return 0;
    return 1;
}

/* What every one of Nova's runs on a host starts from, into *sp: the host
 * cells in Nova's order and the instance cells' state (pyfit._first_run).
 * Returns the answer when it is known before any run (NSE_NO,
 * NSE_UNKNOWN; pyfit._before_any_run), else -1. */
static int start_runs(const struct nse_host *host,
                      const struct nse_host_cell *cells,
                      const struct nse_request *req, const int64_t *pci,
                      struct search *sp)
{
    int i;

    if (host->status == NSE_HOST_NO_TOPOLOGY)
        return NSE_NO;
    if (host->status != NSE_HOST_OK)
        return NSE_UNKNOWN;
    if (req->n_cells == 0 || host->n_cells == 0)
        return NSE_NO;
    if (host->n_cells < req->n_cells)
        return NSE_NO;
    if (permutations(host->n_cells, req->n_cells) > NSE_MAX_PERMUTATIONS)
        return NSE_UNKNOWN;

    /* no memset: the search is large (its pair cache) and every field
     * read below is written first */
    sp->host = host;
    sp->cells = cells;
    sp->req = req;
    sp->pci = pci;
    order_cells(sp);
    for (i = 0; i < req->n_cells; i++) {
        sp->inst_id[i] = req->cells[i].id;
        sp->pagesize[i] = req->cells[i].pagesize;
        sp->pinned_in[i] = -1;
    }
    return -1;
}

/* One of Nova's runs (one allocation candidate) from the state the run
 * before left (pyfit._fit_once): 1 when it fits.  *same says whether the
 * run left the instance cells' ids and page sizes as it found them: every
 * later run then starts from this state and ends the same way. */
static int one_run(struct search *sp, int *same)
{
    int32_t ids_before[NSE_MAX_CELLS];
    int64_t pagesizes_before[NSE_MAX_CELLS];
    size_t n = (size_t)sp->req->n_cells;
    int fits;

    memcpy(ids_before, sp->inst_id, sizeof(ids_before));
    memcpy(pagesizes_before, sp->pagesize, sizeof(pagesizes_before));
    sp->cache.n = 0;
    memset(sp->used, 0, sizeof(sp->used));
    fits = permute(sp, 0);
    *same = memcmp(ids_before, sp->inst_id, n * sizeof(int32_t)) == 0 &&
        memcmp(pagesizes_before, sp->pagesize, n * sizeof(int64_t)) == 0;
    return fits;
}

static int fit_host(const struct nse_host *host,
                    const struct nse_host_cell *cells,
                    const struct nse_request *req, const int64_t *pci,
                    struct search *found)
{
    struct search local;
    struct search *sp = found ? found : &local;
    int candidate, same;
    int answer = start_runs(host, cells, req, pci, sp);

    if (answer >= 0)
        return answer;
    for (candidate = 0; candidate < host->candidates; candidate++) {
        if (one_run(sp, &same))
            return NSE_YES;
        /* the next candidate would fail the same way (pyfit._search) */
        if (same)
            break;
    }
    return NSE_NO;
}

/* Every one of Nova's runs on a host, one per allocation candidate, into
 * runs[0..host->candidates): 1 where the run fits (pyfit.run_outcomes).
 * Returns the host's answer; the runs are all 0 unless it is NSE_YES. */
static int fit_runs(const struct nse_host *host,
                    const struct nse_host_cell *cells,
                    const struct nse_request *req, unsigned char *runs)
{
    struct search search;
    int candidate, same, fits;
    int answer = start_runs(host, cells, req, NULL, &search);

    memset(runs, 0, (size_t)host->candidates);
    if (answer >= 0)
        return answer;
    answer = NSE_NO;
    for (candidate = 0; candidate < host->candidates; candidate++) {
        fits = one_run(&search, &same);
        runs[candidate] = (unsigned char)fits;
        if (fits)
            answer = NSE_YES;
        if (same) {
            memset(runs + candidate, fits,
                   (size_t)(host->candidates - candidate));
            break;
        }
    }
    return answer;
}

/* Read the host record at *offset and advance it; 0 or NSE_ERR_*. */
static int next_host(const unsigned char *hosts, size_t hosts_len,
                     size_t *offset, struct nse_host *host,
                     const struct nse_host_cell **cells)
{
    size_t cells_size;
    int c;

    if (hosts_len - *offset < sizeof(*host))
        return NSE_ERR_TRUNCATED;
    memcpy(host, hosts + *offset, sizeof(*host));
    *offset += sizeof(*host);
    if (!check_host_head(host))
        return NSE_ERR_BAD_HOST;
    cells_size = (size_t)host->n_cells * sizeof(struct nse_host_cell);
    if (hosts_len - *offset < cells_size)
        return NSE_ERR_TRUNCATED;
    /* records are whole multiples of 8 bytes and Python's bytes buffers
     * are 8-byte aligned, so the cells are aligned; refuse otherwise */
    if (((uintptr_t)(hosts + *offset)) % sizeof(int64_t) != 0)
        return NSE_ERR_BAD_HOST;
    *cells = (const struct nse_host_cell *)(hosts + *offset);
    *offset += cells_size;
    for (c = 0; c < host->n_cells; c++)
        if (!check_cell(&(*cells)[c]))
            return NSE_ERR_BAD_HOST;
    return 0;
}

int nse_fit_hosts(const unsigned char *hosts, size_t hosts_len,
                  int32_t n_hosts, const struct nse_request *req,
                  const int64_t *pci, size_t pci_words,
                  unsigned char *answers)
{
    size_t offset = 0, pci_offset = 0;
    int32_t h;

    if (!check_request(req))
        return NSE_ERR_BAD_REQUEST;
    for (h = 0; h < n_hosts; h++) {
        struct nse_host host;
        const struct nse_host_cell *cells;
        const int64_t *host_pci = NULL;
        int rc = next_host(hosts, hosts_len, &offset, &host, &cells);

        if (rc)
            return rc;
        if (req->has_pci) {
            size_t words;
            if (pci_words - pci_offset < 1)
                return NSE_ERR_BAD_PCI;
            if (pci[pci_offset] != host.n_cells)
                return NSE_ERR_BAD_PCI;
            words = 4 + 2 * (size_t)host.n_cells;
            if (pci_words - pci_offset < words)
                return NSE_ERR_BAD_PCI;
            host_pci = pci + pci_offset;
            pci_offset += words;
        }
        answers[h] = (unsigned char)fit_host(&host, cells, req, host_pci,
                                             NULL);
    }
    if (offset != hosts_len)
        return NSE_ERR_TRUNCATED;
    return 0;
}

int nse_fit_runs(const unsigned char *hosts, size_t hosts_len,
                 int32_t n_hosts, const struct nse_request *req,
                 unsigned char *answers, unsigned char *runs,
                 size_t runs_len)
{
    size_t offset = 0, runs_offset = 0;
    int32_t h;

    /* each run of a PCI request also reads its candidate's provider
     * mapping, which no record carries */
    if (!check_request(req) || req->has_pci)
        return NSE_ERR_BAD_REQUEST;
    for (h = 0; h < n_hosts; h++) {
        struct nse_host host;
        const struct nse_host_cell *cells;
        int rc = next_host(hosts, hosts_len, &offset, &host, &cells);

        if (rc)
            return rc;
        if (runs_len - runs_offset < (size_t)host.candidates)
            return NSE_ERR_TRUNCATED;
        answers[h] = (unsigned char)fit_runs(&host, cells, req,
                                             runs + runs_offset);
        runs_offset += (size_t)host.candidates;
    }
    if (offset != hosts_len || runs_offset != runs_len)
        return NSE_ERR_TRUNCATED;
    return 0;
}

/* ------------------------------------------------------------------------
 * Slot counting (NUMASlotWeigher).  pyfit.py's slot functions are the
 * reference; the definition is in doc/source/numa_slot_weigher.rst.
 */

#define SLOTS_MAX INT32_MAX

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t floor_div(double numerator, int64_t denominator)
{
    double q;
    /* !(x > 0) rather than x <= 0: NaN is no room, never a cast of NaN */
    if (!(numerator > 0))
        return 0;
    q = numerator / (double)denominator;
    return q >= (double)SLOTS_MAX ? SLOTS_MAX : (int64_t)q;
}

static int64_t free_pages(const struct nse_host_cell *cell, int p)
{
    return cell->page_total[p] - cell->page_used[p] - cell->page_reserved[p];
}

static int64_t smallest_page(const struct nse_host_cell *cell)
{
    int64_t smallest = cell->page_size_kb[0];
    int p;
    for (p = 1; p < cell->n_pages; p++)
        if (cell->page_size_kb[p] < smallest)
            smallest = cell->page_size_kb[p];
    return smallest;
}

/* Is page size p of the cell a candidate for the requested pagesize? */
static int page_candidate(const struct nse_host_cell *cell, int p,
                          int64_t pagesize)
{
    int64_t size = cell->page_size_kb[p], smallest = smallest_page(cell);
    if (pagesize > 0)
        return size == pagesize;
    if (pagesize == NSE_PAGESIZE_SMALL)
        return size == smallest;
    if (pagesize == NSE_PAGESIZE_LARGE)
        return size != smallest;
    return pagesize == NSE_PAGESIZE_ANY;
}

/* How many copies of one instance cell fit in one host cell alone. */
static int64_t cell_units(const struct nse_host *host,
                          const struct nse_host_cell *cell,
                          const struct nse_request_cell *want)
{
    int dedicated = want->cpu_policy == NSE_CPU_DEDICATED ||
                    want->cpu_policy == NSE_CPU_MIXED;
    int shared = want->cpu_policy == NSE_CPU_SHARED ||
                 want->cpu_policy == NSE_CPU_MIXED;
    int64_t memory_kb = want->memory * 1024;
    int64_t units = SLOTS_MAX;
    int p, t;

    if (want->memory <= 0)
        return 0;
    if (want->pagesize) {
        int64_t by_pages = 0;
        for (p = 0; p < cell->n_pages; p++) {
            int64_t size = cell->page_size_kb[p];
            if (!page_candidate(cell, p, want->pagesize) ||
                    memory_kb % size != 0)
                continue;
            by_pages += floor_div((double)free_pages(cell, p) * size,
                                  memory_kb);
        }
        units = min64(units, by_pages);
    } else if (cell->n_pages > 0) {
        int64_t size = smallest_page(cell);
        for (p = 0; p < cell->n_pages; p++)
            if (cell->page_size_kb[p] == size)
                break;
        if (memory_kb % size != 0)
            return 0;
        if (dedicated)
            units = min64(units, floor_div((double)free_pages(cell, p) * size,
                                           memory_kb));
        else if (memory_kb > cell->page_total[p] * size)
            return 0;
    } else if (dedicated) {
        units = min64(units, floor_div((double)(cell->memory -
                                                cell->memory_usage),
                                       want->memory));
    } else if (cell->memory < want->memory) {
        return 0;
    }

    if (dedicated && want->pcpus > 0) {
        int64_t threads = 0;
        if (want->pcpus > cell->pcpus)
            return 0;
        if (want->thread_policy == NSE_THREAD_ISOLATE) {
            if (cell->threads_per_core != 1 && !cell->pcpus_are_cpus)
                return 0;
            threads = cell->free_sibling_hist[cell->threads_per_core];
        } else if (want->thread_policy == NSE_THREAD_REQUIRE) {
            if (cell->threads_per_core <= 1)
                return 0;
            for (t = 2; t <= NSE_MAX_THREADS; t++)
                threads += (int64_t)t * cell->free_sibling_hist[t];
        } else {
            threads = cell->free_pcpus;
        }
        units = min64(units, threads / want->pcpus);
    }
    if (shared) {
        if (want->cpus > cell->cpus)
            return 0;
        if (host->has_limits) {
            if (want->cpus > 0)
                units = min64(units, floor_div(
                    (double)cell->cpus * host->cpu_allocation_ratio -
                    (double)cell->cpu_usage, want->cpus));
            units = min64(units, floor_div(
                (double)cell->memory * host->ram_allocation_ratio -
                (double)cell->memory_usage, want->memory));
        }
    }
    return units < 0 ? 0 : units;
}

/* The largest instance cell of a shape, field by field: every instance cell
 * fits where it fits, so counting with it never overstates the slots. */
static struct nse_request_cell unit_cell(const struct nse_request *numa)
{
    struct nse_request_cell unit = numa->cells[0];
    int i;
    for (i = 1; i < numa->n_cells; i++) {
        const struct nse_request_cell *c = &numa->cells[i];
        if (c->cpus > unit.cpus)
            unit.cpus = c->cpus;
        if (c->pcpus > unit.pcpus)
            unit.pcpus = c->pcpus;
        if (c->memory > unit.memory)
            unit.memory = c->memory;
    }
    if (numa->emulator_threads_isolated)
        unit.pcpus += 1;
    return unit;
}

static int64_t host_cap(const struct nse_host *host,
                        const struct nse_shape *shape)
{
    int64_t cap = SLOTS_MAX;
    if (host->total_vcpus >= 0 && shape->vcpus > 0)
        cap = min64(cap, floor_div((double)host->free_vcpus, shape->vcpus));
    if (host->total_memory_mb >= 0 && shape->memory_mb > 0)
        cap = min64(cap, floor_div((double)host->free_memory_mb,
                                   shape->memory_mb));
    return cap;
}

/* The most instances of k distinct cells each: the largest t with
 * sum(min(units, t)) >= k * t (for k == 1, the sum), by bisection. */
static int64_t combine_units(const int64_t *units, int n, int k)
{
    int64_t total = 0, lo, hi;
    int c;

    for (c = 0; c < n; c++)
        total += units[c];
    if (k == 1)
        return total;
    lo = 0;
    hi = total / k;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2, sum = 0;
        for (c = 0; c < n; c++)
            sum += min64(units[c], mid);
        if (sum >= (int64_t)k * mid)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Slots of one shape.  units[] holds the per-cell counts: the cells in the
 * `stale` bit mask are (re)computed, the others are taken as given, so the
 * count after placing a request only revisits the cells it changed. */
static int64_t count_slots(const struct nse_host *host,
                           const struct nse_host_cell *cells,
                           const struct nse_shape *shape, int64_t *units,
                           uint32_t stale)
{
    int64_t cap = host_cap(host, shape);
    struct nse_request_cell unit;
    int k = shape->numa.n_cells, c;

    if (host->status != NSE_HOST_OK)
        return k == 0 ? cap : 0;
    if (k == 0)
        return cap;
    if (host->n_cells < k)
        return 0;
    if (stale) {
        unit = unit_cell(&shape->numa);
        for (c = 0; c < host->n_cells; c++)
            if (stale & (1u << c))
                units[c] = cell_units(host, &cells[c], &unit);
    }
    return min64(combine_units(units, host->n_cells, k), cap);
}

/* Take `wanted` threads off the free sibling histogram the way Nova's
 * packing tends to: `threads` per core from the emptiest cores that have
 * that many.  Nova picks cores by list order, which the histogram does not
 * keep; the slot counts only need the histogram, so this is close enough
 * for weighing (never for fitting). */
static void take_threads(struct nse_host_cell *cell, int64_t wanted,
                         int policy)
{
    int t, size, threads = 1;

    if (policy == NSE_THREAD_ISOLATE) {
        int tpc = cell->threads_per_core;
        int64_t cores = min64(wanted, cell->free_sibling_hist[tpc]);
        cell->free_sibling_hist[tpc] -= (int32_t)cores;
        cell->free_sibling_hist[0] += (int32_t)cores;
        cell->free_pcpus -= (int32_t)(cores * tpc);
        return;
    }
    for (t = NSE_MAX_THREADS; t >= 1; t--) {
        int64_t sets = 0;
        for (size = t; size <= NSE_MAX_THREADS; size++)
            sets += cell->free_sibling_hist[size];
        if (sets > 0 && (int64_t)t * sets >= wanted) {
            threads = t;
            break;
        }
    }
    while (wanted > 0) {
        int64_t take;
        for (size = threads; size <= NSE_MAX_THREADS; size++)
            if (cell->free_sibling_hist[size] > 0)
                break;
        if (size > NSE_MAX_THREADS) {
            if (threads == 1)
                break;
            threads = 1;
            continue;
        }
        take = min64(threads, wanted);
        cell->free_sibling_hist[size]--;
        cell->free_sibling_hist[size - take]++;
        cell->free_pcpus -= (int32_t)take;
        wanted -= take;
    }
}

/* Whether a placement found by fit_host carries, in a cell with CPUs to
 * pin, the pinning of another host cell or none (Nova's pair cache
 * skipped the fit there): the compute's claim then refuses it or pins
 * nothing (pyfit._stale_pinning). */
static int stale_pinning(const struct search *s)
{
    const struct nse_request *req = s->req;
    int pos;

    for (pos = 0; pos < req->n_cells; pos++) {
        const struct nse_request_cell *want = &req->cells[pos];
        int reserved = pos == 0 && req->emulator_threads_isolated;

        if (want->cpu_policy != NSE_CPU_DEDICATED &&
                want->cpu_policy != NSE_CPU_MIXED)
            continue;
        if ((want->pcpus > 0 || reserved) &&
                s->pinned_in[pos] != s->perm[pos])
            return 1;
    }
    return 0;
}

#define PLACE_UNKNOWN (-1)
#define PLACE_NO 0
#define PLACE_YES 1

/* The host's cells once the request is placed as Nova places it; returns
 * PLACE_YES, PLACE_NO when the request does not fit, or PLACE_UNKNOWN
 * when the engine cannot tell: on a host of unknown status (for a request
 * without NUMA cells too, so that such a host weighs as the worst host for
 * every request, as pyfit._place), a search beyond the bounds, or a
 * placement with stale pinning (stale_pinning). */
static int place_request(const struct nse_host *host,
                         const struct nse_host_cell *cells,
                         const struct nse_shape *request,
                         struct nse_host *host_after,
                         struct nse_host_cell *cells_after,
                         uint32_t *changed)
{
    struct search s;
    const struct nse_request *req = &request->numa;
    int pos, p;

    *host_after = *host;
    if (host->n_cells > 0)
        memcpy(cells_after, cells,
               (size_t)host->n_cells * sizeof(*cells));
    host_after->free_vcpus -= request->vcpus;
    host_after->free_memory_mb -= request->memory_mb;
    *changed = 0;
    if (host->status != NSE_HOST_OK && host->status != NSE_HOST_NO_TOPOLOGY)
        return PLACE_UNKNOWN;
    if (req->n_cells == 0)
        return PLACE_YES;
    switch (fit_host(host, cells, req, NULL, &s)) {
    case NSE_YES:
        break;
    case NSE_NO:
        return PLACE_NO;
    default:
        return PLACE_UNKNOWN;
    }
    if (stale_pinning(&s))
        return PLACE_UNKNOWN;
    for (pos = 0; pos < req->n_cells; pos++) {
        struct nse_host_cell *cell = &cells_after[s.perm[pos]];
        const struct nse_request_cell *want = &req->cells[pos];

        *changed |= 1u << s.perm[pos];
        int64_t size = s.pagesize[pos];
        int64_t pinned = want->pcpus;

        if (want->cpu_policy == NSE_CPU_SHARED ||
                want->cpu_policy == NSE_CPU_MIXED)
            cell->cpu_usage += want->cpus;
        cell->memory_usage += want->memory;
        if (cell->n_pages > 0) {
            if (size <= 0)
                size = smallest_page(cell);
            for (p = 0; p < cell->n_pages; p++)
                if (cell->page_size_kb[p] == size) {
                    cell->page_used[p] += want->memory * 1024 / size;
                    break;
                }
        }
        if (pos == 0 && req->emulator_threads_isolated)
            pinned += 1;
        if (want->cpu_policy == NSE_CPU_DEDICATED ||
                want->cpu_policy == NSE_CPU_MIXED)
            take_threads(cell, pinned, want->thread_policy);
    }
    return PLACE_YES;
}

static double free_share(const struct nse_host *host)
{
    double share = 0;
    int parts = 0;
    if (host->total_vcpus > 0) {
        share += (double)host->free_vcpus / (double)host->total_vcpus;
        parts++;
    }
    if (host->total_memory_mb > 0) {
        share += (double)host->free_memory_mb / (double)host->total_memory_mb;
        parts++;
    }
    if (!parts)
        return 0;
    share /= parts;
    return share < 0 ? 0 : (share > 1 ? 1 : share);
}

static int check_shapes(const struct nse_shape *shapes, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++) {
        if (!check_request(&shapes[i].numa) || !amount_ok(shapes[i].vcpus) ||
                !amount_ok(shapes[i].memory_mb))
            return 0;
        if (shapes[i].numa.has_pci)
            return 0;
    }
    return 1;
}

static int check_weights(const double *weights, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++)
        if (!weight_ok(weights[i]))
            return 0;
    return 1;
}

/* A host the request cannot be placed on (as far as the engine can tell),
 * -HUGE_VAL in weights, weighs as much as the worst host that can take
 * it (0 when none can). */
static void weigh_unplaced(double *weights, int32_t n_hosts)
{
    double worst = 0;
    int any = 0;
    int32_t h;

    for (h = 0; h < n_hosts; h++)
        if (weights[h] != -HUGE_VAL && (!any || weights[h] < worst)) {
            worst = weights[h];
            any = 1;
        }
    for (h = 0; h < n_hosts; h++)
        if (weights[h] == -HUGE_VAL)
            weights[h] = worst;
}

int nse_slots(const unsigned char *hosts, size_t hosts_len, int32_t n_hosts,
              const struct nse_shape *shapes, const double *shape_weights,
              int32_t n_shapes, const struct nse_shape *request,
              int32_t *before, int32_t *after, double *weights)
{
    size_t offset = 0;
    int32_t h, k;
    /* A tie-break step below the smallest positive weighted loss. */
    double smallest = 1.0, tie;

    if (n_shapes < 0 || !check_shapes(shapes, n_shapes) ||
            !check_weights(shape_weights, n_shapes))
        return NSE_ERR_BAD_REQUEST;
    if (request && !check_shapes(request, 1))
        return NSE_ERR_BAD_REQUEST;
    for (k = 0; k < n_shapes; k++)
        if (shape_weights[k] > 0 && shape_weights[k] < smallest)
            smallest = shape_weights[k];
    tie = smallest / 2;

    for (h = 0; h < n_hosts; h++) {
        struct nse_host host, host_after;
        const struct nse_host_cell *cells;
        struct nse_host_cell cells_after[NSE_MAX_CELLS];
        int64_t units[NSE_MAX_CELLS];
        uint32_t all = 0, changed = 0;
        int placed = 0;
        double loss = 0;
        int rc = next_host(hosts, hosts_len, &offset, &host, &cells);

        if (rc)
            return rc;
        if (request)
            placed = place_request(&host, cells, request, &host_after,
                                   cells_after, &changed) == PLACE_YES;
        all = host.n_cells > 0 ? (uint32_t)((1ull << host.n_cells) - 1) : 0;
        for (k = 0; k < n_shapes; k++) {
            int64_t b = count_slots(&host, cells, &shapes[k], units, all);
            before[(size_t)h * n_shapes + k] = (int32_t)b;
            if (!request)
                continue;
            if (placed) {
                int64_t a = count_slots(&host_after, cells_after, &shapes[k],
                                        units, changed);
                after[(size_t)h * n_shapes + k] = (int32_t)a;
                if (b > a)
                    loss += shape_weights[k] * (double)(b - a);
            } else {
                after[(size_t)h * n_shapes + k] = -1;
            }
        }
        if (request)
            weights[h] = placed ? -loss - tie * free_share(&host_after)
                                : -HUGE_VAL;
    }
    if (offset != hosts_len)
        return NSE_ERR_TRUNCATED;
    if (request)
        weigh_unplaced(weights, n_hosts);
    return 0;
}

/* NUMASlotWeigher's raw weight of one host record (nse_slots' expression,
 * or in room mode, room_cap >= 0, pyfit.room_weight's); -HUGE_VAL when the
 * request cannot be placed there.  No allocation: everything is on the
 * stack, at most NSE_MAX_CELLS cells. */
static double host_slot_weight(const struct nse_host *host,
                               const struct nse_host_cell *cells,
                               const struct nse_shape *shapes,
                               const double *shape_weights, int32_t n_shapes,
                               const struct nse_shape *request, double tie,
                               int64_t room_cap)
{
    struct nse_host host_after;
    struct nse_host_cell cells_after[NSE_MAX_CELLS];
    int64_t units[NSE_MAX_CELLS];
    uint32_t all, changed = 0;
    double loss = 0, weight;
    int32_t k;

    if (place_request(host, cells, request, &host_after, cells_after,
                      &changed) != PLACE_YES)
        return -HUGE_VAL;
    all = host->n_cells > 0 ? (uint32_t)((1ull << host->n_cells) - 1) : 0;
    for (k = 0; k < n_shapes; k++) {
        int64_t b = count_slots(host, cells, &shapes[k], units, all);
        int64_t a = count_slots(&host_after, cells_after, &shapes[k], units,
                                changed);
        if (b > a)
            loss += shape_weights[k] * (double)(b - a);
    }
    weight = -loss - tie * free_share(&host_after);
    if (room_cap >= 0) {
        int64_t room = count_slots(host, cells, request, units, all);
        if (room_cap > 0 && room > room_cap)
            room = room_cap;
        weight = (double)room + 0.5 / (1.0 - weight);
    }
    return weight;
}

int nse_slot_weights_indexed(const unsigned char *arena, size_t arena_len,
                             const int64_t *offsets, int32_t n_slots,
                             const int32_t *index, const int32_t *candidates,
                             int32_t n_hosts, const struct nse_shape *shapes,
                             const double *shape_weights, int32_t n_shapes,
                             const struct nse_shape *request,
                             int64_t room_cap, double *memo,
                             int32_t memo_rows, int32_t memo_col,
                             int32_t memo_cols, double *weights)
{
    int32_t h, k;
    double smallest = 1.0, tie;

    if (n_shapes < 0 || n_slots < 0 || n_hosts < 0 || !request ||
            !check_shapes(shapes, n_shapes) || !check_shapes(request, 1) ||
            !check_weights(shape_weights, n_shapes) ||
            room_cap > SLOTS_MAX)
        return NSE_ERR_BAD_REQUEST;
    if (memo && (memo_rows < n_slots || memo_cols <= 0 || memo_col < 0 ||
                 memo_col >= memo_cols))
        return NSE_ERR_BAD_REQUEST;
    for (k = 0; k < n_shapes; k++)
        if (shape_weights[k] > 0 && shape_weights[k] < smallest)
            smallest = shape_weights[k];
    tie = smallest / 2;
    if (memo)
        memo += (size_t)memo_col * (size_t)memo_rows;

    for (h = 0; h < n_hosts; h++) {
        struct nse_host host;
        const struct nse_host_cell *cells;
        size_t offset;
        int32_t slot = index[h];
        /* allocation candidates to weigh with; -1: the record's own */
        int32_t cand = candidates ? candidates[h] : (memo ? 1 : -1);
        int use_memo = memo && cand == 1;
        int rc;

        if (slot < 0 || slot >= n_slots)
            return NSE_ERR_TRUNCATED;
        /* a memo hit needs nothing from the record: do not touch it */
        if (use_memo && !isnan(memo[slot])) {
            weights[h] = memo[slot];
            continue;
        }
        if (offsets[slot] < 0 || (uint64_t)offsets[slot] > arena_len)
            return NSE_ERR_TRUNCATED;
        offset = (size_t)offsets[slot];
        rc = next_host(arena, arena_len, &offset, &host, &cells);
        if (rc)
            return rc;
        if (candidates && (cand < 0 || cand > NSE_MAX_CANDIDATES))
            return NSE_ERR_BAD_HOST;
        if (cand >= 0)
            host.candidates = cand;
        weights[h] = host_slot_weight(&host, cells, shapes, shape_weights,
                                      n_shapes, request, tie, room_cap);
        if (use_memo)
            memo[slot] = weights[h];
    }
    weigh_unplaced(weights, n_hosts);
    return 0;
}

/* A constant rather than a function: a function the cffi wrapper calls
 * adds a PLT entry before the code, which moves (and realigns) every hot
 * function of this file. */
const struct nse_layout nse_layout = {
    sizeof(struct nse_host),
    sizeof(struct nse_host_cell),
    sizeof(struct nse_request),
    sizeof(struct nse_request_cell),
    sizeof(struct nse_shape),
};

/* ------------------------------------------------------------------------
 * Capacity counting (nova_sched_ext.capacity).  pyfit.place_counts is the
 * reference.
 */

/* Whether a host that place_request filled is still inside the bounds its
 * record was checked against when it was read (usage only grows, so after
 * enough instances it could leave them); only the cells in `changed`
 * moved. */
static int still_in_bounds(const struct nse_host *host,
                           const struct nse_host_cell *cells,
                           uint32_t changed)
{
    int c;

    if (!check_host_head(host))
        return 0;
    for (c = 0; c < host->n_cells; c++)
        if ((changed & (1u << c)) && !check_cell(&cells[c]))
            return 0;
    return 1;
}

/* The count of one shape on one host, or -1 when the engine cannot tell.
 * The host is filled on two stack copies that take turns: no allocation,
 * at most NSE_MAX_CELLS cells each. */
static int32_t place_count(const struct nse_host *host,
                           const struct nse_host_cell *cells,
                           const struct nse_shape *shape, int32_t limit)
{
    struct nse_host state[2];
    struct nse_host_cell state_cells[2][NSE_MAX_CELLS];
    uint32_t changed = 0;
    int32_t count = 0;
    int cur = 0;

    if (limit == 0)
        return 0;
    if (shape->numa.n_cells == 0)
        return limit;
    if (host->status != NSE_HOST_OK && host->status != NSE_HOST_NO_TOPOLOGY)
        return -1;
    state[0] = *host;
    if (host->n_cells > 0)
        memcpy(state_cells[0], cells, (size_t)host->n_cells * sizeof(*cells));
    while (count < limit) {
        int next = 1 - cur, placed;

        /* the record as read was checked by next_host; a filled one here */
        if (count > 0 && !still_in_bounds(&state[cur], state_cells[cur],
                                          changed))
            return -1;
        placed = place_request(&state[cur], state_cells[cur], shape,
                               &state[next], state_cells[next], &changed);
        if (placed == PLACE_UNKNOWN)
            return -1;
        if (placed == PLACE_NO)
            break;
        count++;
        cur = next;
    }
    return count;
}

int nse_place_counts(const unsigned char *hosts, size_t hosts_len,
                     int32_t n_hosts, const struct nse_shape *shapes,
                     int32_t n_shapes, const int32_t *limits,
                     int32_t *counts)
{
    size_t offset = 0, i;
    int32_t h, k;

    if (n_hosts < 0 || n_shapes < 0 || !check_shapes(shapes, n_shapes))
        return NSE_ERR_BAD_REQUEST;
    for (i = 0; i < (size_t)n_hosts * (size_t)n_shapes; i++)
        if (limits[i] < 0 || limits[i] > NSE_MAX_INSTANCES)
            return NSE_ERR_BAD_REQUEST;
    for (h = 0; h < n_hosts; h++) {
        struct nse_host host;
        const struct nse_host_cell *cells;
        int rc = next_host(hosts, hosts_len, &offset, &host, &cells);

        if (rc)
            return rc;
        for (k = 0; k < n_shapes; k++) {
            size_t at = (size_t)h * (size_t)n_shapes + (size_t)k;
            counts[at] = place_count(&host, cells, &shapes[k], limits[at]);
        }
    }
    if (offset != hosts_len)
        return NSE_ERR_TRUNCATED;
    return 0;
}

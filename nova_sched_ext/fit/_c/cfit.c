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
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cfit.h"

#define CPU_SHARED 0
#define CPU_DEDICATED 1
#define CPU_MIXED 2
#define THREAD_PREFER 0
#define THREAD_REQUIRE 1
#define THREAD_ISOLATE 2
#define PAGESIZE_SMALL -1
#define PAGESIZE_LARGE -2
#define PAGESIZE_ANY -3
#define PCI_LEGACY 0
#define PCI_REQUIRED 1
#define PCI_PREFERRED 2

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
    if (pagesize == PAGESIZE_SMALL)
        first = n > 0 ? n - 1 : 0;
    else if (pagesize == PAGESIZE_LARGE)
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

    if (thread_policy == THREAD_ISOLATE) {
        if (largest < tpc)
            return 0;
        if (tpc != 1 && !cell->pcpus_are_cpus)
            return 0;
        pin = pinning(1, at_least[tpc], wanted);
        return pin == PIN_SOME &&
               reserved_ok(reserved, pin, total_free - wanted * tpc);
    }

    if (thread_policy == THREAD_REQUIRE && tpc <= 1)
        return 0;
    pin = PIN_NONE;
    for (t = largest; t >= 1; t--) {
        if (thread_policy == THREAD_REQUIRE && t <= 1)
            continue;
        pin = pinning(t, at_least[t], wanted);
        if (pin == PIN_NONE ||
                !reserved_ok(reserved, pin, total_free - wanted))
            continue;
        break;
    }
    if (thread_policy != THREAD_REQUIRE && pin != PIN_SOME)
        pin = pinning(1, total_free, wanted);
    return pin != PIN_NONE && reserved_ok(reserved, pin, total_free - wanted);
}

/* Nova's _numa_fit_instance_cell; may update *pagesize like Nova does. */
static int fit_cell(const struct nse_host *host,
                    const struct nse_host_cell *cell,
                    const struct nse_request_cell *req, int64_t *pagesize,
                    int reserved)
{
    int dedicated = req->cpu_policy == CPU_DEDICATED ||
                    req->cpu_policy == CPU_MIXED;
    int shared = req->cpu_policy == CPU_SHARED ||
                 req->cpu_policy == CPU_MIXED;
    int64_t memory_kb = req->memory * 1024;

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
    if (s->req->cells[0].cpu_policy == CPU_SHARED) {
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
    if (req->pci_policy == PCI_REQUIRED || m >= wanted)
        return e >= wanted;
    if (req->pci_policy == PCI_LEGACY || m + matching_no_numa >= wanted)
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
        int reserved;

        if (state == CACHE_NOT_FIT)
            return 0;
        if (state == CACHE_FIT) {
            s->inst_id[pos] = cell->id;
            continue;
        }
        reserved = (req->emulator_threads_isolated && pos == 0) ? 1 : 0;
        if (!fit_cell(s->host, cell, &req->cells[pos], &s->pagesize[pos],
                      reserved)) {
            cache_put(&s->cache, cell->id, s->inst_id[pos], CACHE_NOT_FIT);
            return 0;
        }
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

static int check_request(const struct nse_request *req)
{
    int i;
    if (req->n_cells < 0 || req->n_cells > NSE_MAX_CELLS)
        return 0;
    for (i = 0; i < req->n_cells; i++) {
        const struct nse_request_cell *c = &req->cells[i];
        if (c->cpus < 0 || c->pcpus < 0 || c->memory < 0)
            return 0;
        if (c->cpu_policy < CPU_SHARED || c->cpu_policy > CPU_MIXED)
            return 0;
        if (c->thread_policy < THREAD_PREFER ||
                c->thread_policy > THREAD_ISOLATE)
            return 0;
        if (c->pagesize < PAGESIZE_ANY)
            return 0;
    }
    if (req->has_pci && (req->pci_policy < PCI_LEGACY ||
                         req->pci_policy > PCI_PREFERRED))
        return 0;
    return 1;
}

static int check_cell(const struct nse_host_cell *c)
{
    int t;
    if (c->n_pages < 0 || c->n_pages > NSE_MAX_PAGE_SIZES)
        return 0;
    if (c->threads_per_core < 1 || c->threads_per_core > NSE_MAX_THREADS)
        return 0;
    for (t = 0; t <= NSE_MAX_THREADS; t++)
        if (c->free_sibling_hist[t] < 0)
            return 0;
    for (t = 0; t < c->n_pages; t++)
        if (c->page_size_kb[t] <= 0)
            return 0;
    return 1;
}

static int fit_host(const struct nse_host *host,
                    const struct nse_host_cell *cells,
                    const struct nse_request *req, const int64_t *pci)
{
    struct search s;
    int i, candidate;

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

    memset(&s, 0, sizeof(s));
    s.host = host;
    s.cells = cells;
    s.req = req;
    s.pci = pci;
    order_cells(&s);
    for (i = 0; i < req->n_cells; i++) {
        s.inst_id[i] = req->cells[i].id;
        s.pagesize[i] = req->cells[i].pagesize;
    }
    for (candidate = 0; candidate < host->candidates; candidate++) {
        s.cache.n = 0;
        memset(s.used, 0, sizeof(s.used));
        if (permute(&s, 0))
            return NSE_YES;
    }
    return NSE_NO;
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
        size_t cells_size;
        int c;

        if (hosts_len - offset < sizeof(host))
            return NSE_ERR_TRUNCATED;
        memcpy(&host, hosts + offset, sizeof(host));
        offset += sizeof(host);
        if (host.n_cells < 0 || host.n_cells > NSE_MAX_CELLS ||
                host.candidates < 0)
            return NSE_ERR_BAD_HOST;
        cells_size = (size_t)host.n_cells * sizeof(struct nse_host_cell);
        if (hosts_len - offset < cells_size)
            return NSE_ERR_TRUNCATED;
        /* records are built by struct packing at 8-byte multiples, and
         * cffi's buffers are 8-byte aligned, so the cells are aligned */
        if (((uintptr_t)(hosts + offset)) % sizeof(int64_t) != 0)
            return NSE_ERR_BAD_HOST;
        cells = (const struct nse_host_cell *)(hosts + offset);
        offset += cells_size;
        for (c = 0; c < host.n_cells; c++)
            if (!check_cell(&cells[c]))
                return NSE_ERR_BAD_HOST;

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
        answers[h] = (unsigned char)fit_host(&host, cells, req, host_pci);
    }
    if (offset != hosts_len)
        return NSE_ERR_TRUNCATED;
    return 0;
}

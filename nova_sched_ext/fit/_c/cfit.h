/*
 * nova-sched-ext NUMA fit engine: data layout shared by cfit.c and the cffi
 * declarations in _cfit_build.py (which reads this header).
 *
 * Hosts are passed as one byte buffer of variable-length records: a
 * struct nse_host followed by n_cells struct nse_host_cell.  The caller
 * builds it once per request by joining per-host records it caches.
 */
#define NSE_MAX_CELLS 16
#define NSE_MAX_PAGE_SIZES 8
#define NSE_MAX_THREADS 16
#define NSE_HIST_LEN 17
#define NSE_MAX_PERMUTATIONS 200000
/* Bounds on values from the caller, so that no product or loop of the
 * helper can overflow or run away: Nova's retries per allocation candidate,
 * allocation ratios, CPU counts (a cell's or a request's), memory in MiB and
 * page counts, page sizes in KiB.  2**38 MiB and pages of 2**24 KiB keep
 * every product within int64; larger inputs are refused (NSE_ERR_BAD_*). */
#define NSE_MAX_CANDIDATES 1000
#define NSE_MAX_ALLOCATION_RATIO 10000
#define NSE_MAX_CPUS 1048576
#define NSE_MAX_AMOUNT 274877906944
#define NSE_MAX_PAGE_SIZE_KB 16777216
/* The most instances of one shape nse_place_counts places on one host: a
 * bound on its loop (a flavor of 1 vCPU at an allocation ratio of 16 on a
 * 1,024-thread host is 16,384). */
#define NSE_MAX_INSTANCES 65536

#define NSE_NO 0
#define NSE_YES 1
#define NSE_UNKNOWN 2

#define NSE_HOST_OK 0
#define NSE_HOST_NO_TOPOLOGY 1
#define NSE_HOST_UNSUPPORTED 2

/* Codes of a request cell's CPU allocation policy, thread policy and page
 * size (> 0: an explicit size in KiB), and of the PCI NUMA affinity policy. */
#define NSE_CPU_SHARED 0
#define NSE_CPU_DEDICATED 1
#define NSE_CPU_MIXED 2
#define NSE_THREAD_PREFER 0
#define NSE_THREAD_REQUIRE 1
#define NSE_THREAD_ISOLATE 2
#define NSE_PAGESIZE_NONE 0
#define NSE_PAGESIZE_SMALL -1
#define NSE_PAGESIZE_LARGE -2
#define NSE_PAGESIZE_ANY -3
#define NSE_PCI_LEGACY 0
#define NSE_PCI_REQUIRED 1
#define NSE_PCI_PREFERRED 2

#define NSE_ERR_TRUNCATED -1
#define NSE_ERR_BAD_HOST -2
#define NSE_ERR_BAD_REQUEST -3
#define NSE_ERR_BAD_PCI -4

struct nse_host {
    int32_t status;
    int32_t n_cells;
    int32_t has_limits;
    int32_t has_pci_stats;
    int32_t candidates;
    int32_t reserved_;
    double cpu_allocation_ratio;
    double ram_allocation_ratio;
    /* Host-level room, as placement sees it (VCPU, MEMORY_MB); a negative
     * total means unknown (no cap).  Used by slot counting only. */
    int64_t total_vcpus;
    int64_t free_vcpus;
    int64_t total_memory_mb;
    int64_t free_memory_mb;
};

struct nse_host_cell {
    int64_t memory;
    int64_t memory_usage;
    int64_t pci_devices;
    int64_t page_size_kb[NSE_MAX_PAGE_SIZES];
    int64_t page_total[NSE_MAX_PAGE_SIZES];
    int64_t page_used[NSE_MAX_PAGE_SIZES];
    int64_t page_reserved[NSE_MAX_PAGE_SIZES];
    int32_t id;
    int32_t cpus;
    int32_t pcpus;
    int32_t free_pcpus;
    int32_t cpu_usage;
    int32_t threads_per_core;
    int32_t pcpus_are_cpus;
    int32_t n_pages;
    /* free_sibling_hist[s]: number of sibling sets with s free threads */
    int32_t free_sibling_hist[NSE_HIST_LEN];
    int32_t reserved_;
};

struct nse_request_cell {
    int64_t memory;
    int64_t pagesize;
    int32_t id;
    int32_t cpus;
    int32_t pcpus;
    int32_t cpu_policy;
    int32_t thread_policy;
    int32_t reserved_;
};

struct nse_request {
    int32_t n_cells;
    int32_t emulator_threads_isolated;
    int32_t has_pci;
    int32_t pci_count;
    int32_t pci_policy;
    int32_t has_pci_requests;
    int32_t pack;
    int32_t reserved_;
    struct nse_request_cell cells[NSE_MAX_CELLS];
};

/* A flavor shape for slot counting: its host-level needs and, when it has
 * a NUMA topology (numa.n_cells > 0), its instance cells. */
struct nse_shape {
    int64_t vcpus;
    int64_t memory_mb;
    struct nse_request numa;
};

/*
 * The sizes of the structs above as cfit.c was compiled (nse_layout).  The
 * Python side packs records with its own layouts (fit/packing.py);
 * fit/lowlevel.py refuses a helper whose sizes or constants differ from
 * them, so that a helper built from another version of this header is
 * never fed records it would misread.
 */
struct nse_layout {
    int64_t host;
    int64_t host_cell;
    int64_t request;
    int64_t request_cell;
    int64_t shape;
};

extern const struct nse_layout nse_layout;

/*
 * Answer, for each of n_hosts records in hosts[0..hosts_len), whether the
 * request fits (NSE_YES / NSE_NO / NSE_UNKNOWN), into answers[0..n_hosts).
 * pci (pci_words int64 words) holds one record per host when req->has_pci:
 * n_cells, matching[n_cells], eligible[n_cells], matching_no_numa,
 * eligible_no_numa, eligible_all.  Returns 0, or a negative NSE_ERR_* when
 * the input is malformed (answers are then undefined).
 */
int nse_fit_hosts(const unsigned char *hosts, size_t hosts_len,
                  int32_t n_hosts, const struct nse_request *req,
                  const int64_t *pci, size_t pci_words,
                  unsigned char *answers);

/*
 * Nova's runs, one per allocation candidate, for each of n_hosts records:
 * answers[h] as nse_fit_hosts, and runs[o + c] 1 where the run of the
 * host's candidate c fits, 0 where it does not, o being the sum of the
 * candidates of the records before h (NUMATopologyFilter keeps a host's
 * candidates whose run fits, each run starting from what the one before
 * left).  runs_len must be the sum of every record's candidates.  A host
 * not answered NSE_YES has all its runs 0.  A request with PCI devices is
 * refused (NSE_ERR_BAD_REQUEST): their runs read each candidate's provider
 * mapping.  Returns 0 or a negative NSE_ERR_*.
 */
int nse_fit_runs(const unsigned char *hosts, size_t hosts_len,
                 int32_t n_hosts, const struct nse_request *req,
                 unsigned char *answers, unsigned char *runs,
                 size_t runs_len);

/*
 * Slot counting.  For each host and each of n_shapes shapes, before[h *
 * n_shapes + s] is how many more instances of that shape the host can take
 * at the same time (see doc/source/numa_slot_weigher.rst for the
 * definition).  When request is not NULL, after[...] is the same count once
 * the request is placed the way Nova places it (or -1 when the request does
 * not fit the host), and weights[h] is the NUMASlotWeigher raw weight:
 * minus the shape_weights-weighted slots lost, minus a tie-break below any
 * loss step that prefers fuller hosts.  Returns 0 or a negative NSE_ERR_*.
 */
int nse_slots(const unsigned char *hosts, size_t hosts_len, int32_t n_hosts,
              const struct nse_shape *shapes, const double *shape_weights,
              int32_t n_shapes, const struct nse_shape *request,
              int32_t *before, int32_t *after, double *weights);

/*
 * Capacity counting.  For each host h and each of n_shapes shapes k,
 * counts[h * n_shapes + k] is how many instances of the shape the host
 * takes at the same time, placed one after another exactly as Nova places
 * them (each where numa_fit_instance_to_host puts it, its usage accounted
 * before the next), stopping at limits[h * n_shapes + k] (in
 * 0..NSE_MAX_INSTANCES: what placement allows).  A shape without NUMA
 * cells is not placed (it is counted at its limit), a host of unknown
 * status for a shape with cells is -1 ("cannot tell"), as is a host whose
 * state leaves the engine's bounds while it is being filled.  Returns 0 or
 * a negative NSE_ERR_* (counts are then undefined).
 */
int nse_place_counts(const unsigned char *hosts, size_t hosts_len,
                     int32_t n_hosts, const struct nse_shape *shapes,
                     int32_t n_shapes, const int32_t *limits,
                     int32_t *counts);

/*
 * nse_slots' weights (request required), for host records kept between
 * requests.  arena[0..arena_len) holds records; offsets[0..n_slots) says
 * where each slot's record starts.  Host h of this request is slot
 * index[h].  room_cap >= 0 selects room mode (0: no cap; see
 * NUMASlotWeigher).  Host h is weighed with candidates[h] allocation
 * candidates; candidates NULL means 1 each with a memo, the record's own
 * without.  memo (NULL: none) is a column-major table of memo_cols columns
 * of memo_rows (>= n_slots) raw weights, NaN where unknown: for the hosts
 * weighed with one candidate, column memo_col is read (the record is then
 * not read at all) and filled where NaN.  weights[0..n_hosts) gets the
 * weights, hosts the request cannot be placed on taking the worst.
 * Returns 0 or a negative NSE_ERR_* (weights are then undefined; memo
 * entries written are valid).
 */
int nse_slot_weights_indexed(const unsigned char *arena, size_t arena_len,
                             const int64_t *offsets, int32_t n_slots,
                             const int32_t *index, const int32_t *candidates,
                             int32_t n_hosts, const struct nse_shape *shapes,
                             const double *shape_weights, int32_t n_shapes,
                             const struct nse_shape *request,
                             int64_t room_cap, double *memo,
                             int32_t memo_rows, int32_t memo_col,
                             int32_t memo_cols, double *weights);

/* A persistent thread pool and the deterministic chunk dispatcher.
 *
 * vg_parallel_for splits [0, n) into T contiguous chunks, T = max(1, min(threads, n / min_chunk, 64)).
 * The chunk bounds depend only on n and T, and every kernel computes each chunk on its own, so the result
 * is the same for every thread count and whichever thread computes a chunk. The caller runs chunk 0
 * without the counter (so it takes the first chunk even when a spinning worker reaches the counter
 * first), then it and the pool's workers 1..T-1 claim chunks 1..T-1 from a shared counter until none is
 * left, and the caller returns when all are done: a worker that wakes late (a sleeping thread takes tens
 * of microseconds to run again, and one woken after a pause often lands on its waker's core for a while)
 * leaves its chunks to the others instead of holding the caller up; a worker that cannot be started
 * claims nothing (with none started, the caller runs every chunk). One caller uses the pool at a time:
 * another that dispatches meanwhile (a second Python thread: kernel calls let go of the GIL) runs its
 * chunks itself (`run_alone_if_taken`).
 *
 * Waiting spins first (pause instructions, yielding the CPU every 64 of them, so that a busy machine's
 * other threads are not held up) and only then sleeps on a condition variable: a decode step dispatches a
 * 30-100 us product every few microseconds. A worker spins for `spin_ns` of wall time at most (200 us,
 * `vg_pool_spin`): within a step the next dispatch comes sooner, and between steps (the server's sampling,
 * events and HTTP, milliseconds) a worker that spun on (100,000 pauses, 3-5 ms here) took a fifth of the
 * server's CPU from the threads that had work. The caller's own wait for its job's chunks spins longer:
 * those chunks are running. A dispatch that wakes sleeping workers first
 * moves them off the caller's CPU (`steer_sleepers`): Linux puts a thread woken after a pause on its
 * waker's CPU, behind the caller, and a dispatch after a pause then ran on one core.
 *
 * Each thread counts the chunks it runs (`vg_pool_chunks`: a relaxed atomic increment per chunk, on a
 * cache line of its own), so that a test can see that a kernel which should run on several threads did.
 * Which thread claims a chunk depends on timing; `vg_pool_static(1)` makes it depend on nothing: chunk c
 * is run by worker c (chunk 0 by the caller, as are those of workers that could not be started), the
 * caller waiting for them. For tests: the chunks, and so the bits, are the same either way.
 *
 * `vg_pool_timing(1)` counts the thread CPU time of every chunk (CLOCK_THREAD_CPUTIME_ID: what another
 * process takes of a CPU is not counted), so that a busy machine can still say how well a kernel splits:
 * `vg_pool_times` gives the time of the calls run whole on the caller, and for the splits the sum over
 * them of their slowest thread's time (what they would take on idle cores, the dispatch aside) and of all
 * their threads' time.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#include "vg.h"

#define VG_MAX_THREADS 64

static pthread_mutex_t dispatch_lock = PTHREAD_MUTEX_INITIALIZER; /* one caller uses the pool at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static int nworkers = 0; /* workers 1..nworkers are running */
static pthread_t tids[VG_MAX_THREADS];
static int sleeping[VG_MAX_THREADS]; /* worker k waits on work_cv (written under `lock`) */
static int pinned = 0;               /* VERIGRAD_PIN_THREADS=1: workers keep their CPUs */
static unsigned long generation = 0; /* written under `lock`; read atomically by spinning threads */
static unsigned long start_generation[VG_MAX_THREADS];
static int pending = 0; /* chunks not yet done; atomic */
static int active = 0;  /* workers between reading the job and their last claim; atomic */
static int atfork_set = 0;
static int static_schedule = 0; /* vg_pool_static */

/* chunks run by the calling threads (0) and by worker k (k), and (vg_pool_timing) their CPU time in the
 * current split; one cache line each */
static struct {
    int64_t chunks, ns;
    char pad[64 - 2 * sizeof(int64_t)];
} ran[VG_MAX_THREADS];

static int timing = 0;           /* vg_pool_timing */
static int64_t times[5];         /* vg_pool_times's counts */
static __thread int chunk_depth; /* a call inside a chunk is counted in that chunk's time */

static int64_t thread_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* fn(ctx, lo, hi), its thread CPU time added to *ns when timing (and not inside another timed chunk) */
static void timed_call(vg_chunk_fn fn, void *ctx, int64_t lo, int64_t hi, int64_t *ns) {
    if (!__atomic_load_n(&timing, __ATOMIC_RELAXED) || chunk_depth) {
        fn(ctx, lo, hi);
        return;
    }
    int64_t start = thread_ns();
    chunk_depth = 1;
    fn(ctx, lo, hi);
    chunk_depth = 0;
    __atomic_add_fetch(ns, thread_ns() - start, __ATOMIC_RELAXED);
}

static struct {
    vg_chunk_fn fn;
    void *ctx;
    int64_t n;
    int chunks;  /* T */
    int helpers; /* workers 1..helpers take part */
    int fixed;   /* the static schedule: worker k runs chunk k */
    int next;    /* the next chunk to claim (from 1: the caller runs chunk 0); atomic */
} job;

static void chunk_bounds(int64_t n, int chunks, int i, int64_t *lo, int64_t *hi) {
    int64_t base = n / chunks, rem = n % chunks;
    *lo = i * base + (i < rem ? i : rem);
    *hi = *lo + base + (i < rem ? 1 : 0);
}

/* Runs chunk c on thread `id` (0: the caller); returns whether it was the job's last to finish. */
static int run_chunk(vg_chunk_fn fn, void *ctx, int64_t n, int chunks, int c, int id) {
    int64_t lo, hi;
    chunk_bounds(n, chunks, c, &lo, &hi);
    timed_call(fn, ctx, lo, hi, &ran[id].ns);
    __atomic_add_fetch(&ran[id].chunks, 1, __ATOMIC_RELAXED);
    return __atomic_sub_fetch(&pending, 1, __ATOMIC_ACQ_REL) == 0;
}

/* Claims and runs the job's chunks until none is left (fn, ctx, n and chunks read by the claimer); in
 * the static schedule (`fixed`), worker `id` runs chunk `id` only. A worker that finishes the last chunk
 * wakes the caller; the caller (id 0) checks `pending` itself. */
static void run_chunks(vg_chunk_fn fn, void *ctx, int64_t n, int chunks, int id, int fixed) {
    for (;;) {
        int c = fixed ? id : __atomic_fetch_add(&job.next, 1, __ATOMIC_ACQ_REL);
        if (c >= chunks) return;
        if (run_chunk(fn, ctx, n, chunks, c, id) && id > 0) {
            pthread_mutex_lock(&lock);
            pthread_cond_signal(&done_cv);
            pthread_mutex_unlock(&lock);
        }
        if (fixed) return;
    }
}

#define SPINS 100000 /* the caller's wait for its job's running chunks */

static int64_t spin_ns = 200000; /* a worker's spin before it sleeps (vg_pool_spin); atomic */

static int64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(int i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 63) sched_yield(); /* give way to a thread waiting for this CPU */
}

/* With VERIGRAD_PIN_THREADS=1, worker `id` runs on the id-th CPU the process may use (when there are
 * that many). Unpinned, a thread woken after a pause is often placed on its waker's CPU and shares a core
 * with the caller for a while; pinned, it cannot move away from a CPU another process keeps busy, and
 * several processes pin their workers to the same CPUs: so it is a choice for a machine given to one
 * process, as OpenMP's OMP_PROC_BIND is. */
static int pin_set(int id, cpu_set_t *one) {
    const char *flag = getenv("VERIGRAD_PIN_THREADS");
    if (flag == 0 || !(strcasecmp(flag, "1") == 0 || strcasecmp(flag, "true") == 0 ||
                       strcasecmp(flag, "yes") == 0 || strcasecmp(flag, "on") == 0))
        return 0; /* as settings.env_flag reads a switch; anything else (it only moves threads) is off */
    pinned = 1;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 0;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen++ == id) {
            CPU_ZERO(one);
            CPU_SET(cpu, one);
            return 1;
        }
    }
    return 0;
}

static void *worker(void *arg);

/* Worker `id`, pinned from its creation (set in its attributes) where asked. */
static int start_worker(pthread_t *tid, int id) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return -1;
    cpu_set_t one;
    if (pin_set(id, &one)) pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    int failed = pthread_create(tid, &attr, worker, (void *)(intptr_t)id);
    pthread_attr_destroy(&attr);
    return failed;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
#ifdef __linux__
    char name[16]; /* "vg-pool-<id>": a profiler, top -H and a benchmark's /proc reading tell the workers apart */
    snprintf(name, sizeof name, "vg-pool-%d", id);
    pthread_setname_np(pthread_self(), name);
#endif
    pthread_mutex_lock(&lock);
    unsigned long seen = start_generation[id];
    for (;;) {
        int64_t spin = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
        if (generation == seen && spin > 0) { /* spin before sleeping (see above) */
            pthread_mutex_unlock(&lock);
            int64_t until = monotonic_ns() + spin;
            for (int i = 0; __atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen; i++) {
                cpu_relax(i);
                if (i % 64 == 63 && monotonic_ns() >= until) break;
            }
            pthread_mutex_lock(&lock);
        }
        sleeping[id] = 1;
        while (generation == seen) pthread_cond_wait(&work_cv, &lock);
        sleeping[id] = 0;
        seen = generation;
        if (id <= job.helpers) { /* the job read under the lock; the caller waits for `active` */
            vg_chunk_fn fn = job.fn;
            void *ctx = job.ctx;
            int64_t n = job.n;
            int chunks = job.chunks, fixed = job.fixed;
            __atomic_add_fetch(&active, 1, __ATOMIC_ACQ_REL);
            pthread_mutex_unlock(&lock);
            run_chunks(fn, ctx, n, chunks, id, fixed);
            pthread_mutex_lock(&lock);
            if (__atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL) == 0) pthread_cond_signal(&done_cv);
        }
    }
    return 0;
}

/* The pool's threads do not exist in a forked child: start again with none. */
static void reset_after_fork(void) {
    pthread_mutex_init(&dispatch_lock, 0);
    pthread_mutex_init(&lock, 0);
    pthread_cond_init(&work_cv, 0);
    pthread_cond_init(&done_cv, 0);
    nworkers = 0;
    pending = 0;
    active = 0;
    for (int id = 0; id < VG_MAX_THREADS; id++) sleeping[id] = 0;
}

int vg_pool_size(void) { return nworkers; }

/* The chunks run by the calling threads (out[0]) and by workers 1..size-1 since the last reset (`reset`:
 * set to 0 as they are read); returns how many counts there are (VG_MAX_THREADS). */
int vg_pool_chunks(int64_t *out, int size, int reset) {
    for (int id = 0; id < size && id < VG_MAX_THREADS; id++)
        out[id] = reset ? __atomic_exchange_n(&ran[id].chunks, 0, __ATOMIC_RELAXED)
                        : __atomic_load_n(&ran[id].chunks, __ATOMIC_RELAXED);
    return VG_MAX_THREADS;
}

/* Chunk timing on (1) or off (0), from the next dispatch; returns the previous setting. */
int vg_pool_timing(int on) {
    pthread_mutex_lock(&dispatch_lock);
    int was = timing;
    __atomic_store_n(&timing, on != 0, __ATOMIC_RELAXED);
    for (int id = 0; id < VG_MAX_THREADS; id++) ran[id].ns = 0;
    pthread_mutex_unlock(&dispatch_lock);
    return was;
}

/* What vg_pool_timing counted since the last reset (`reset`: from now on), in out[0..4]: the thread CPU
 * nanoseconds of the calls run whole (one chunk, on the caller), the sum over the splits of their slowest
 * thread's nanoseconds, the sum of all their threads' nanoseconds, the number of splits, the number of
 * calls run whole; returns 5. */
int vg_pool_times(int64_t *out, int reset) {
    pthread_mutex_lock(&dispatch_lock);
    for (int i = 0; i < 5; i++) /* whole calls add theirs without the lock */
        out[i] = reset ? __atomic_exchange_n(&times[i], 0, __ATOMIC_RELAXED) : __atomic_load_n(&times[i], __ATOMIC_RELAXED);
    pthread_mutex_unlock(&dispatch_lock);
    return 5;
}

/* A worker's spin before it sleeps, in nanoseconds of wall time (0: it sleeps at once), from its next
 * wait; a negative `ns` changes nothing. Returns the previous setting. */
int64_t vg_pool_spin(int64_t ns) {
    return ns < 0 ? __atomic_load_n(&spin_ns, __ATOMIC_RELAXED) : __atomic_exchange_n(&spin_ns, ns, __ATOMIC_RELAXED);
}

/* The static schedule on (1) or off (0), from the next dispatch; returns the previous setting. */
int vg_pool_static(int on) {
    pthread_mutex_lock(&dispatch_lock);
    int was = static_schedule;
    static_schedule = on != 0;
    pthread_mutex_unlock(&dispatch_lock);
    return was;
}

/* Workers 1..helpers that sleep are woken onto CPUs other than the caller's (unless pinned): Linux
 * places a thread woken after a pause on its waker's CPU, where it waits behind the caller (which keeps
 * computing its chunks) for milliseconds, so that a dispatch after a pause ran on one core. A worker
 * already spinning is left where it is. Called under `lock`. */
static void steer_sleepers(int helpers) {
    if (pinned) return;
    int any = 0;
    for (int id = 1; id <= helpers; id++) any |= sleeping[id];
    if (!any) return;
    cpu_set_t allowed; /* read each time: the process's CPUs may have changed */
    int cpu = sched_getcpu();
    if (cpu < 0 || sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    if (!CPU_ISSET(cpu, &allowed) || CPU_COUNT(&allowed) < 2) return;
    cpu_set_t others = allowed;
    CPU_CLR(cpu, &others);
    for (int id = 1; id <= helpers; id++)
        if (sleeping[id]) pthread_setaffinity_np(tids[id], sizeof others, &others);
}

/* A caller that finds the pool taken (another Python thread's kernel, or a chunk that dispatches again)
 * runs its chunks itself, in order: the same bounds, so the same bits, without waiting for the other
 * caller's job (nor, for a nested dispatch, a wait on its own). */
static int run_alone_if_taken(int64_t n, int chunks, vg_chunk_fn fn, void *ctx) {
    if (pthread_mutex_trylock(&dispatch_lock) == 0) return 0;
    for (int c = 0; c < chunks; c++) {
        int64_t lo, hi;
        chunk_bounds(n, chunks, c, &lo, &hi);
        fn(ctx, lo, hi);
    }
    return 1;
}

void vg_parallel_for(int64_t n, int64_t min_chunk, int threads, vg_chunk_fn fn, void *ctx) {
    if (min_chunk < 1) min_chunk = 1;
    int64_t t = threads;
    if (n / min_chunk < t) t = n / min_chunk;
    if (t > VG_MAX_THREADS) t = VG_MAX_THREADS;
    if (t <= 1) {
        if (n > 0) {
            int64_t ns = 0;
            timed_call(fn, ctx, 0, n, &ns);
            if (ns) {
                __atomic_add_fetch(&times[0], ns, __ATOMIC_RELAXED);
                __atomic_add_fetch(&times[4], 1, __ATOMIC_RELAXED);
            }
            __atomic_add_fetch(&ran[0].chunks, 1, __ATOMIC_RELAXED);
        }
        return;
    }
    int chunks = (int)t;
    if (run_alone_if_taken(n, chunks, fn, ctx)) return; /* else it holds dispatch_lock */
    pthread_mutex_lock(&lock);
    if (!atfork_set) {
        pthread_atfork(0, 0, reset_after_fork);
        atfork_set = 1;
    }
    while (nworkers < chunks - 1) {
        pthread_t tid;
        int id = nworkers + 1;
        start_generation[id] = generation;
        if (start_worker(&tid, id) != 0) break;
        pthread_detach(tid);
        tids[id] = tid;
        nworkers = id;
    }
    int helpers = nworkers < chunks - 1 ? nworkers : chunks - 1;
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.chunks = chunks;
    job.helpers = helpers;
    job.fixed = static_schedule;
    __atomic_store_n(&job.next, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&pending, chunks, __ATOMIC_RELEASE);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    if (helpers > 0) {
        steer_sleepers(helpers);
        pthread_cond_broadcast(&work_cv);
    }
    pthread_mutex_unlock(&lock);

    run_chunk(fn, ctx, n, chunks, 0, 0); /* the caller's chunk, whoever else is awake */
    if (job.fixed)                       /* and those of workers that could not be started */
        for (int c = helpers + 1; c < chunks; c++) run_chunk(fn, ctx, n, chunks, c, 0);
    else
        run_chunks(fn, ctx, n, chunks, 0, 0);

    /* every chunk done, and no worker still holding this job (it would claim from the next one's counter) */
    for (int i = 0; i < SPINS && (__atomic_load_n(&pending, __ATOMIC_ACQUIRE) > 0 ||
                                  __atomic_load_n(&active, __ATOMIC_ACQUIRE) > 0); i++)
        cpu_relax(i);
    pthread_mutex_lock(&lock);
    while (__atomic_load_n(&pending, __ATOMIC_ACQUIRE) > 0 || __atomic_load_n(&active, __ATOMIC_ACQUIRE) > 0)
        pthread_cond_wait(&done_cv, &lock);
    job.helpers = 0; /* closed: a worker that gets the lock only now takes no part (its ctx is gone) */
    if (timing) { /* every chunk done: the threads' times are in */
        int64_t slowest = 0, all = 0;
        for (int id = 0; id <= helpers; id++) {
            int64_t ns = __atomic_exchange_n(&ran[id].ns, 0, __ATOMIC_RELAXED);
            slowest = ns > slowest ? ns : slowest;
            all += ns;
        }
        __atomic_add_fetch(&times[1], slowest, __ATOMIC_RELAXED);
        __atomic_add_fetch(&times[2], all, __ATOMIC_RELAXED);
        __atomic_add_fetch(&times[3], 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&dispatch_lock);
}

/* The asynchronous gemm_acc: a worker thread runs queued c += a.T @ b tasks in FIFO order while
 * the interpreter goes on with the kernel's bookkeeping (included by _fastpath.c, after
 * gemm_task, run_task and has_nan).
 *
 *   gemm_submit(c, a, b) -> int     validates as gemm_acc does and queues the task; returns the
 *                                   number of tasks completed so far (the caller drops its
 *                                   references to those), or -1 when not queued: the case does
 *                                   not apply, or the queue is halted (the caller drains, then
 *                                   takes the synchronous path)
 *   gemm_drain() -> (done, total)   waits (GIL released) until the queue is empty or halted and
 *                                   empties it: tasks done .. total-1 were NOT run, and the
 *                                   caller runs them, in order, with numpy
 *   gemm_queue_capacity(n) -> int   sets the ring's size (only while empty; tests); returns the
 *                                   previous one
 *   gemm_queue_stats() -> tuple     (capacity, full-ring waits, NaN halts, worker running)
 *
 * One worker, each task one sgemm call as gemm_acc makes it: numpy's BLAS gives other bits for
 * a product split into column or row blocks, or run with another thread count, so the work is
 * neither split between workers nor run single-threaded.  The worker checks each task's c for
 * a NaN first (gemm_acc declines those) and halts there, leaving that task and every later one
 * unrun.  It never touches a Python object: the Python side (fastpath.py) keeps the arrays
 * alive until their task is done.  The worker starts on the first submit and again in a forked
 * child (the fork handlers wait for it to be idle, so a child never holds a half-written c;
 * fastpath.py also drains before os.fork).
 */
#if !defined(_WIN32) && !defined(TRNSIM_NO_THREADS)
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

#define QUEUE_MAX 4096 /* the ring's storage; gemm_queue_capacity picks how much of it is used */

static gemm_task q_ring[QUEUE_MAX];
static uint64_t q_cap = 1024; /* enough to never wait in a tiled kernel's accumulation chain */
static uint64_t q_head, q_tail; /* tasks finished, tasks queued (since the last drain) */
static int q_halted;            /* the task at q_head found a NaN in its c: the worker stops */
static int q_live;              /* a worker runs in this process (none in a forked child) */
static pid_t q_pid;
static uint64_t q_full_waits, q_halts;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_work = PTHREAD_COND_INITIALIZER; /* worker: a task or a reset */
static pthread_cond_t q_done = PTHREAD_COND_INITIALIZER; /* submit / drain: progress or halt */
static int q_waiting; /* threads blocked on q_done: the worker wakes them only then (a wake-up
                       * per task would cost the BLAS threads a context switch each) */

/* the worker finished the queue or halted (or none runs here: nothing will change) */
static int q_idle(void) { return !q_live || q_head == q_tail || q_halted; }

static int q_room(void) { return !q_halted && q_tail - q_head < q_cap; }

static void *q_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&q_mu);
    for (;;) {
        while (q_head == q_tail || q_halted)
            pthread_cond_wait(&q_work, &q_mu);
        gemm_task t = q_ring[q_head % q_cap];
        pthread_mutex_unlock(&q_mu);
        int nan = has_nan(t.c, t.M, t.N, t.ldc);
        if (!nan)
            run_task(&t);
        pthread_mutex_lock(&q_mu);
        if (nan) {
            q_halted = 1;
            q_halts++;
        } else
            q_head++;
        if (q_waiting)
            pthread_cond_broadcast(&q_done);
    }
    return NULL;
}

/* fork: the parent waits for the worker to be idle and holds the lock across the fork, so the
 * child's copy of the queue is consistent; the child has no worker (threads do not survive a
 * fork) and fresh locks */
static void q_prepare(void) {
    pthread_mutex_lock(&q_mu);
    q_waiting++;
    while (q_pid == getpid() && !q_idle())
        pthread_cond_wait(&q_done, &q_mu);
    q_waiting--;
}

static void q_parent(void) { pthread_mutex_unlock(&q_mu); }

static void q_child(void) {
    pthread_mutex_init(&q_mu, NULL);
    pthread_cond_init(&q_work, NULL);
    pthread_cond_init(&q_done, NULL);
    q_live = 0;
    q_waiting = 0;
    q_pid = getpid();
}

/* a worker in this process (started lazily, again after a fork); -1 if none can be started */
static int q_start(void) {
    static int handlers = 0;
    if (q_live && q_pid == getpid())
        return 0;
    if (q_live) /* forked without the handlers running (a raw clone): start afresh */
        q_child();
    if (!handlers) {
        if (pthread_atfork(q_prepare, q_parent, q_child) != 0)
            return -1;
        handlers = 1;
    }
    if (q_tail != 0) /* a forked child's unrun tasks stay for its drain, on the numpy path */
        return -1;
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, q_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return -1;
    q_live = 1;
    q_pid = getpid();
    return 0;
}

static PyObject *py_gemm_submit(PyObject *self, PyObject *args) {
    PyObject *oc, *oa, *ob;
    if (!PyArg_ParseTuple(args, "OOO", &oc, &oa, &ob))
        return NULL;
    gemm_task t;
    if (sgemm_fn == NULL || !gemm_task_of(oc, oa, ob, &t) || q_start() < 0)
        return PyLong_FromLong(-1);
    pthread_mutex_lock(&q_mu);
    if (!q_halted && !q_room()) {
        /* a full ring waits for the worker without the GIL (the worker never needs it) */
        q_full_waits++;
        pthread_mutex_unlock(&q_mu);
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&q_mu);
        q_waiting++;
        while (!q_halted && !q_room())
            pthread_cond_wait(&q_done, &q_mu);
        q_waiting--;
        pthread_mutex_unlock(&q_mu);
        Py_END_ALLOW_THREADS
        pthread_mutex_lock(&q_mu);
    }
    long long ret = -1;
    if (q_room()) {
        q_ring[q_tail % q_cap] = t;
        q_tail++;
        pthread_cond_signal(&q_work);
        ret = (long long)q_head;
    }
    pthread_mutex_unlock(&q_mu);
    return PyLong_FromLongLong(ret);
}

static PyObject *py_gemm_drain(PyObject *self, PyObject *noargs) {
    uint64_t done, total;
    if (q_live && q_pid != getpid())
        q_child();
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q_mu);
    q_waiting++;
    while (!q_idle())
        pthread_cond_wait(&q_done, &q_mu);
    q_waiting--;
    done = q_head;
    total = q_tail;
    /* the worker is idle here (queue empty, or halted): start over with an empty ring */
    q_head = q_tail = 0;
    q_halted = 0;
    pthread_mutex_unlock(&q_mu);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("KK", (unsigned long long)done, (unsigned long long)total);
}

static PyObject *py_gemm_queue_capacity(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    if (n < 1 || n > QUEUE_MAX) {
        PyErr_Format(PyExc_ValueError, "capacity: 1 to %d tasks", QUEUE_MAX);
        return NULL;
    }
    pthread_mutex_lock(&q_mu);
    uint64_t was = q_cap;
    int empty = q_tail == 0;
    if (empty)
        q_cap = (uint64_t)n;
    pthread_mutex_unlock(&q_mu);
    if (!empty) {
        PyErr_SetString(PyExc_RuntimeError, "the gemm queue is not empty: drain it first");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(was);
}

static PyObject *py_gemm_queue_stats(PyObject *self, PyObject *noargs) {
    pthread_mutex_lock(&q_mu);
    PyObject *r = Py_BuildValue("KKKi", (unsigned long long)q_cap,
                                (unsigned long long)q_full_waits, (unsigned long long)q_halts,
                                q_live && q_pid == getpid());
    pthread_mutex_unlock(&q_mu);
    return r;
}

#else /* no POSIX threads (Windows, or built with -DTRNSIM_NO_THREADS): nothing is ever queued,
       * every accumulation runs at once */

static PyObject *py_gemm_submit(PyObject *self, PyObject *args) { return PyLong_FromLong(-1); }

static PyObject *py_gemm_drain(PyObject *self, PyObject *noargs) {
    return Py_BuildValue("KK", 0ULL, 0ULL);
}

static PyObject *py_gemm_queue_capacity(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return PyLong_FromLong(0);
}

static PyObject *py_gemm_queue_stats(PyObject *self, PyObject *noargs) {
    return Py_BuildValue("KKKi", 0ULL, 0ULL, 0ULL, 0);
}
#endif

#define QUEUE_METHODS                                                                           \
    {"gemm_submit", py_gemm_submit, METH_VARARGS,                                              \
     "gemm_submit(c, a, b) -> int: queue c += a.T @ b; tasks done so far, or -1: not queued"},  \
        {"gemm_drain", py_gemm_drain, METH_NOARGS,                                             \
         "gemm_drain() -> (done, total): wait for the queue; tasks done..total-1 were not run"}, \
        {"gemm_queue_capacity", py_gemm_queue_capacity, METH_VARARGS,                          \
         "gemm_queue_capacity(n) -> previous: the ring's size (queue empty only)"},            \
        {"gemm_queue_stats", py_gemm_queue_stats, METH_NOARGS,                                 \
         "gemm_queue_stats() -> (capacity, full waits, NaN halts, worker running)"},

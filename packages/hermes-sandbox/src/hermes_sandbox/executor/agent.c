/* hermes-exec: the command executor that lives inside one sandbox (see executor/wire.py).
 *
 * It is started once per sandbox with a control socket (--control-fd N). For every command the
 * client sends one byte with SCM_RIGHTS carrying the agent's end of a fresh socketpair; on that
 * socket it writes a request frame (argv, env, cwd, rlimits, timeout, output cap, stdin) and
 * reads the command's output and exit frames. Closing the socket cancels the command.
 *
 * Kill-the-whole-tree: with --pidns every command gets its own pid and mount namespace whose
 * init (a copy of this agent, without capabilities and under the command's seccomp filter)
 * mounts a fresh /proc and waits for the command; when the command's shell exits, the init
 * exits and the kernel kills everything left in the namespace. Without --pidns the agent is a
 * child subreaper: the command's process group is killed when it ends, and every orphan the
 * agent inherits is killed too.
 *
 * Output: the first half of each stream's cap is streamed in batches of 64 KiB as it comes,
 * the last half is kept in a ring and sent when the command ends, with the totals, so no side
 * ever holds more than the cap. Everything is single-threaded around one epoll loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL_VERSION 1
#define MAX_EXECS 512
#define MAX_FRAME (64u << 20)
#define READ_CHUNK 65536
#define DRAIN_GRACE_MS 1000
#define STDIN_HIGH_WATER (1u << 20)
#define FLUSH_BATCH (64u << 10)

enum { S_OUT = 0, S_ERR = 1 };

typedef struct { char *data; size_t len, cap; } buf_t;

typedef struct {
    uint64_t total, head_sent, head_limit, tail_limit;
    char *ring; size_t ring_len, ring_pos;  /* last tail_limit bytes, circular */
    int fd;
} stream_t;

typedef struct exec {
    uint32_t gen;           /* tags epoll events, so a reused entry ignores stale ones */
    int used, sock, sock_closed, cancelled, timed_out, reaped, status;
    int state;              /* 0 reading request, 1 running, 2 finishing */
    buf_t in, out, stdin_buf;
    int stdin_fd, stdin_wanted, stdin_eof, stdin_watched, err_fd;
    buf_t err_msg;
    stream_t s[2];
    pid_t pid;              /* the namespace init (--pidns) or the command itself */
    int64_t deadline, drain_deadline;
    /* request */
    char **argv, **envp, *cwd; int argc, envc;
    int nlimits; struct { uint32_t res; uint64_t val; } limits[16];
    uint64_t timeout_ms, max_output;
    int has_ids; uint32_t uid, gid;
} exec_t;

static int g_epoll, g_control, g_sigfd, g_pidns, g_drop_caps, g_last_cap = 63;
static int64_t g_sweep_until;  /* without --pidns: keep killing orphans until then */
static struct sock_fprog g_filter;
static exec_t g_execs[MAX_EXECS];

/* ---- small helpers ------------------------------------------------------------------------ */

static int64_t now_ms(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void die(const char *what) {
    fprintf(stderr, "hermes-exec: %s: %s\n", what, strerror(errno));
    _exit(1);
}

static void buf_add(buf_t *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) die("out of memory");
        b->data = d; b->cap = cap;
    }
    memcpy(b->data + b->len, p, n); b->len += n;
}

static void buf_drop(buf_t *b, size_t n) {
    memmove(b->data, b->data + n, b->len - n); b->len -= n;
}

static void buf_free(buf_t *b) { free(b->data); memset(b, 0, sizeof *b); }

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

static void put32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

static void put64(unsigned char *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); }

static void frame(buf_t *b, char type, const void *p, size_t n) {
    unsigned char h[5]; put32(h, (uint32_t)n); h[4] = (unsigned char)type;
    buf_add(b, h, 5); if (n) buf_add(b, p, n);
}

static void watch(int fd, uint32_t events, uint64_t tag, int op) {
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    if (epoll_ctl(g_epoll, op, fd, &ev) < 0 && op != EPOLL_CTL_DEL) die("epoll_ctl");
}

/* epoll tags: kind in the top byte, the entry's generation, then its index. */
enum { T_CONTROL = 1, T_SIGNAL, T_SOCK, T_OUT, T_ERR, T_IN, T_SETUP };
#define TAG(kind, i) (((uint64_t)(kind) << 56) | ((uint64_t)(g_execs[i].gen & 0xffffff) << 32) | (uint32_t)(i))

static void close_fd(int *fd) {
    if (*fd >= 0) { epoll_ctl(g_epoll, EPOLL_CTL_DEL, *fd, NULL); close(*fd); *fd = -1; }
}


/* Close every descriptor >= lowest. Without close_range (gVisor has none) the open ones are
 * listed from /proc/self/fd: a blind loop over 65,536 numbers cost 600 ms there per command. */
static void close_from(int lowest) {
    if (syscall(SYS_close_range, lowest, ~0U, 0) == 0) return;
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        for (int fd = lowest; fd < 65536; fd++) close(fd);
        return;
    }
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            const char *name = buf + off + 19; /* d_ino(8) d_off(8) d_reclen(2) d_type(1) */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            off += reclen;
            if (name[0] < '0' || name[0] > '9') continue;
            int fd = atoi(name);
            if (fd >= lowest && fd != dir) close(fd);
        }
    }
    close(dir);
}

/* ---- the command: namespace init and the command process ----------------------------------- */

static void setup_fail(int err_fd, const char *what, const char *arg) {
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%s%s%s: %s", what, arg ? " " : "", arg ? arg : "", strerror(errno));
    if (n > 0 && write(err_fd, msg, (size_t)n) < 0) { /* nothing left to tell */ }
    _exit(127);
}

/* The command's user (if the request names one), no capabilities, then its seccomp filter. */
static void become_command(exec_t *e, int err_fd) {
    if (e->has_ids && (setgroups(0, NULL) < 0 || setgid(e->gid) < 0 || setuid(e->uid) < 0))
        setup_fail(err_fd, "cannot switch to the command's user", NULL);
    if (g_drop_caps) {
        struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        for (int cap = 0; cap <= g_last_cap; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
        if (syscall(SYS_capset, &hdr, data) < 0) setup_fail(err_fd, "cannot drop capabilities", NULL);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) setup_fail(err_fd, "cannot set no_new_privs", NULL);
    if (g_filter.len && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &g_filter) < 0)
        setup_fail(err_fd, "cannot load the seccomp filter", NULL);
}

static void run_command(exec_t *e, int err_fd) {
    if (setsid() < 0) setup_fail(err_fd, "setsid", NULL);
    if (!g_pidns) become_command(e, err_fd);  /* with --pidns the namespace init did it */
    for (int i = 0; i < e->nlimits; i++) {
        rlim_t v = e->limits[i].val == UINT64_MAX ? RLIM_INFINITY : (rlim_t)e->limits[i].val;
        struct rlimit rl = {v, v};
        if (setrlimit((int)e->limits[i].res, &rl) < 0) {
            char name[32]; snprintf(name, sizeof name, "%u=%llu", e->limits[i].res,
                                    (unsigned long long)e->limits[i].val);
            setup_fail(err_fd, "cannot set rlimit", name);
        }
    }
    signal(SIGPIPE, SIG_DFL);
    if (e->cwd && chdir(e->cwd) < 0) {
        dprintf(2, "hermes-exec: cannot enter the working directory %s: %s\n", e->cwd, strerror(errno));
        _exit(1);
    }
    execvpe(e->argv[0], e->argv, e->envp);  /* a bare name is looked up on our own PATH */
    setup_fail(err_fd, "cannot run", e->argv[0]);
}

/* The init of a command's pid namespace: a fresh /proc, no privileges, then wait. */
static void namespace_init(exec_t *e, int err_fd) {
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        setup_fail(err_fd, "cannot make the mounts private", NULL);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        setup_fail(err_fd, "cannot mount /proc", NULL);
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) { if (write(fd, "1000", 4) < 0) { /* best effort */ } close(fd); }
    become_command(e, err_fd);
    pid_t child = fork();
    if (child < 0) setup_fail(err_fd, "fork", NULL);
    if (child == 0) run_command(e, err_fd);
    close(err_fd);
    close(0); close(1); close(2);
    for (;;) {
        int st;
        pid_t p = wait(&st);
        if (p < 0 && errno != EINTR) _exit(127);
        if (p == child) _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
}

static int start_command(exec_t *e) {
    int out[2], err[2], in[2] = {-1, -1}, setup[2];
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(setup, O_CLOEXEC) < 0)
        return -1;
    if (e->stdin_wanted && pipe2(in, O_CLOEXEC) < 0) return -1;
    unsigned long flags = SIGCHLD | (g_pidns ? CLONE_NEWPID | CLONE_NEWNS : 0);
    pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); /* its own /proc/self/fd, before close_from */
        signal(SIGPIPE, SIG_DFL);
        sigset_t none; sigemptyset(&none); sigprocmask(SIG_SETMASK, &none, NULL);
        int stdin_fd = e->stdin_wanted ? in[0] : open("/dev/null", O_RDONLY);
        if (stdin_fd < 0 || dup2(stdin_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 ||
            dup2(setup[1], 3) < 0)
            _exit(127);
        close_from(4);
        fcntl(3, F_SETFD, FD_CLOEXEC);
        if (g_pidns) namespace_init(e, 3);
        run_command(e, 3);
    }
    close(out[1]); close(err[1]); close(setup[1]);
    if (e->stdin_wanted) { close(in[0]); e->stdin_fd = in[1]; fcntl(in[1], F_SETFL, O_NONBLOCK); }
    int i = (int)(e - g_execs);
    e->pid = pid;
    e->s[S_OUT].fd = out[0]; e->s[S_ERR].fd = err[0]; e->err_fd = setup[0];
    for (int k = 0; k < 2; k++) fcntl(e->s[k].fd, F_SETFL, O_NONBLOCK);
    fcntl(setup[0], F_SETFL, O_NONBLOCK);
    watch(out[0], EPOLLIN, TAG(T_OUT, i), EPOLL_CTL_ADD);
    watch(err[0], EPOLLIN, TAG(T_ERR, i), EPOLL_CTL_ADD);
    watch(setup[0], EPOLLIN, TAG(T_SETUP, i), EPOLL_CTL_ADD);
    e->deadline = now_ms() + (int64_t)e->timeout_ms;
    return 0;
}

/* Kill what a command left: its whole namespace, or its process group and our orphans (every
 * child of ours that is not a running command's process; /proc/self/task/N/children lists them). */
static int is_running_command(pid_t pid) {
    for (int i = 0; i < MAX_EXECS; i++)
        if (g_execs[i].used && g_execs[i].pid == pid && !g_execs[i].reaped) return 1;
    return 0;
}

static void kill_orphans(void) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "re");
    if (!f) return;
    int pid;
    while (fscanf(f, "%d", &pid) == 1)
        if (!is_running_command(pid)) { kill(-pid, SIGKILL); kill(pid, SIGKILL); }
    fclose(f);
}

static void kill_command(exec_t *e) {
    if (e->pid <= 0 || e->reaped) return;
    kill(e->pid, SIGKILL);
    if (!g_pidns) kill(-e->pid, SIGKILL);
}

/* ---- request parsing ---------------------------------------------------------------------- */

static int parse_request(exec_t *e, const unsigned char *p, size_t n) {
    char **argv = calloc(n / 5 + 2, sizeof *argv), **envp = calloc(n / 5 + 2, sizeof *envp);
    if (!argv || !envp) die("out of memory");
    e->argv = argv; e->envp = envp; e->timeout_ms = 60000; e->max_output = 1 << 20;
    size_t off = 0;
    while (off < n) {
        if (n - off < 5) return -1;
        unsigned char tag = p[off]; uint32_t len = get32(p + off + 1); off += 5;
        if (len > n - off) return -1;
        const unsigned char *v = p + off; off += len;
        char *s = NULL;
        if (tag == 'a' || tag == 'e' || tag == 'd') {
            if (memchr(v, 0, len)) return -1;
            s = malloc(len + 1); if (!s) die("out of memory");
            memcpy(s, v, len); s[len] = 0;
        }
        switch (tag) {
        case 'a': argv[e->argc++] = s; break;
        case 'e': envp[e->envc++] = s; break;
        case 'd': free(e->cwd); e->cwd = s; break;
        case 'l':
            if (len != 12 || e->nlimits >= 16) return -1;
            e->limits[e->nlimits].res = get32(v); e->limits[e->nlimits].val = get64(v + 4);
            e->nlimits++; break;
        case 't': if (len != 8) return -1; e->timeout_ms = get64(v); break;
        case 'm': if (len != 8) return -1; e->max_output = get64(v); break;
        case 's': e->stdin_wanted = 1; break;
        case 'u': if (len != 8) return -1; e->has_ids = 1; e->uid = get32(v); e->gid = get32(v + 4); break;
        default: return -1;
        }
    }
    if (e->argc == 0 || e->max_output < 2) return -1;
    for (int k = 0; k < 2; k++) {
        e->s[k].head_limit = e->max_output / 2;
        e->s[k].tail_limit = e->max_output - e->max_output / 2;
    }
    return 0;
}

/* ---- per-exec lifecycle ------------------------------------------------------------------- */

/* Interest follows need: the socket's input only below the stdin high-water mark, its output
 * only with bytes pending, the stdin pipe only with bytes to write (epoll is level-triggered). */
static void update_interest(exec_t *e) {
    int i = (int)(e - g_execs);
    if (e->sock >= 0) {
        int pending = e->out.len && (e->state != 1 || e->out.len >= FLUSH_BATCH);
        uint32_t ev = EPOLLRDHUP | (e->stdin_buf.len <= STDIN_HIGH_WATER ? EPOLLIN : 0) |
                      (pending ? EPOLLOUT : 0);
        watch(e->sock, ev, TAG(T_SOCK, i), EPOLL_CTL_MOD);
    }
    if (e->stdin_fd >= 0) {
        int want = e->stdin_buf.len > 0;
        if (want != e->stdin_watched) {
            watch(e->stdin_fd, EPOLLOUT, TAG(T_IN, i), want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL);
            e->stdin_watched = want;
        }
    }
}

static void fail_exec(exec_t *e, const char *msg) {
    frame(&e->out, 'F', msg, strlen(msg));
    e->state = 2;
}

static void reset_exec(exec_t *e) {
    uint32_t gen = e->gen;
    memset(e, 0, sizeof *e);
    e->gen = gen + 1;
    e->sock = e->s[0].fd = e->s[1].fd = e->stdin_fd = e->err_fd = -1;
}

static void free_exec(exec_t *e) {
    close_fd(&e->sock); close_fd(&e->s[0].fd); close_fd(&e->s[1].fd);
    close_fd(&e->stdin_fd); close_fd(&e->err_fd);
    buf_free(&e->in); buf_free(&e->out); buf_free(&e->stdin_buf); buf_free(&e->err_msg);
    for (int k = 0; k < 2; k++) free(e->s[k].ring);
    for (int k = 0; k < e->argc; k++) free(e->argv[k]);
    for (int k = 0; k < e->envc; k++) free(e->envp[k]);
    free(e->argv); free(e->envp); free(e->cwd);
    reset_exec(e);
}

static void feed_stream(exec_t *e, int k, const char *p, size_t n) {
    stream_t *s = &e->s[k];
    s->total += n;
    if (s->head_sent < s->head_limit) {
        size_t take = n < s->head_limit - s->head_sent ? n : (size_t)(s->head_limit - s->head_sent);
        frame(&e->out, k == S_OUT ? 'o' : 'e', p, take);
        s->head_sent += take; p += take; n -= take;
    }
    if (!n || !s->tail_limit) return;
    if (!s->ring) { s->ring = malloc(s->tail_limit); if (!s->ring) die("out of memory"); }
    if (n >= s->tail_limit) { p += n - s->tail_limit; n = s->tail_limit; }
    for (size_t done = 0; done < n;) {
        size_t room = s->tail_limit - s->ring_pos, take = n - done < room ? n - done : room;
        memcpy(s->ring + s->ring_pos, p + done, take);
        s->ring_pos = (s->ring_pos + take) % s->tail_limit; done += take;
        s->ring_len = s->ring_len + take > s->tail_limit ? s->tail_limit : s->ring_len + take;
    }
}

static void finish(exec_t *e) {
    for (int k = 0; k < 2; k++) {
        stream_t *s = &e->s[k];
        if (!s->ring_len) continue;
        size_t start = (s->ring_pos + s->tail_limit - s->ring_len) % s->tail_limit;
        buf_t tail = {0};
        size_t first = s->ring_len < s->tail_limit - start ? s->ring_len : s->tail_limit - start;
        buf_add(&tail, s->ring + start, first);
        if (first < s->ring_len) buf_add(&tail, s->ring, s->ring_len - first);
        frame(&e->out, k == S_OUT ? 'O' : 'E', tail.data, tail.len);
        buf_free(&tail);
    }
    if (e->err_msg.len) {
        buf_add(&e->err_msg, "", 1);
        char msg[600]; snprintf(msg, sizeof msg, "the command could not start: %s", e->err_msg.data);
        fail_exec(e, msg);
        return;
    }
    unsigned char x[21];
    int code = e->timed_out ? 124 : e->status;
    put32(x, (uint32_t)code); x[4] = (unsigned char)e->timed_out;
    put64(x + 5, e->s[S_OUT].total); put64(x + 13, e->s[S_ERR].total);
    frame(&e->out, 'X', x, sizeof x);
    e->state = 2;
}

static void maybe_finish(exec_t *e) {
    if (e->state != 1 || !e->reaped || e->err_fd >= 0) return;
    if (e->s[0].fd >= 0 || e->s[1].fd >= 0) {
        if (!e->drain_deadline) e->drain_deadline = now_ms() + DRAIN_GRACE_MS;
        if (now_ms() < e->drain_deadline) return;
        close_fd(&e->s[0].fd); close_fd(&e->s[1].fd);
    }
    close_fd(&e->stdin_fd);
    e->stdin_watched = 0;
    finish(e);
}

static void flush_out(exec_t *e) {
    /* A running command's head output waits until there is a batch: every send wakes the
     * client, and it only needs the output when the command ends. */
    int hold = e->state == 1 && e->out.len < FLUSH_BATCH;
    while (e->out.len && !e->sock_closed && !hold) {
        ssize_t w = send(e->sock, e->out.data, e->out.len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) break;
        if (w <= 0) { e->sock_closed = 1; break; }
        buf_drop(&e->out, (size_t)w);
    }
    if (e->sock_closed) {  /* the client is gone: a running command is cancelled */
        close_fd(&e->sock);
        e->out.len = 0;
        if (!e->reaped) { e->cancelled = 1; kill_command(e); }
    }
    int settled = e->pid == 0 || e->reaped;
    if ((e->state == 2 || e->sock_closed) && settled && !e->out.len) { free_exec(e); return; }
    update_interest(e);
}

static void pump_stdin(exec_t *e) {
    while (e->stdin_fd >= 0 && e->stdin_buf.len) {
        ssize_t w = write(e->stdin_fd, e->stdin_buf.data, e->stdin_buf.len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return;
        if (w <= 0) { close_fd(&e->stdin_fd); e->stdin_watched = 0; e->stdin_buf.len = 0; return; }
        buf_drop(&e->stdin_buf, (size_t)w);
    }
    if (e->stdin_fd >= 0 && e->stdin_eof && !e->stdin_buf.len) { close_fd(&e->stdin_fd); e->stdin_watched = 0; }
}

static void on_frame(exec_t *e, char type, const unsigned char *p, size_t n) {
    if (type == 'R' && e->state == 0) {
        if (parse_request(e, p, n) < 0) { fail_exec(e, "malformed request"); return; }
        e->state = 1;
        if (start_command(e) < 0) {
            char msg[200]; snprintf(msg, sizeof msg, "cannot start the command: %s", strerror(errno));
            fail_exec(e, msg);
        }
    } else if (type == 'I' && e->state == 1 && e->stdin_wanted) {
        if (e->stdin_fd >= 0) buf_add(&e->stdin_buf, p, n);
        pump_stdin(e);
    } else if (type == 'C' && e->state == 1 && e->stdin_wanted) {
        e->stdin_eof = 1; pump_stdin(e);
    } else if (e->state != 2) {
        fail_exec(e, "unexpected frame");
        kill_command(e);
    }
}

static void on_sock(exec_t *e, uint32_t events) {
    if (events & EPOLLIN) {
        char chunk[READ_CHUNK];
        for (;;) {
            if (e->stdin_buf.len > STDIN_HIGH_WATER) break;  /* back-pressure: the pipe is full */
            if (e->state == 2) e->in.len = 0;  /* finished: whatever still comes is moot */
            ssize_t r = recv(e->sock, chunk, sizeof chunk, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && errno == EAGAIN) break;
            if (r <= 0) { e->sock_closed = 1; break; }
            buf_add(&e->in, chunk, (size_t)r);
            while (e->in.len >= 5 && e->state != 2) {
                uint32_t len = get32((unsigned char *)e->in.data);
                if (len > MAX_FRAME) { fail_exec(e, "frame too large"); kill_command(e); break; }
                if (e->in.len < 5 + (size_t)len) break;
                on_frame(e, e->in.data[4], (unsigned char *)e->in.data + 5, len);
                buf_drop(&e->in, 5 + (size_t)len);
            }
        }
    }
    if (events & (EPOLLHUP | EPOLLERR) && !(events & EPOLLIN)) e->sock_closed = 1;
    if (events & EPOLLRDHUP && e->stdin_buf.len > STDIN_HIGH_WATER) e->sock_closed = 1;
    flush_out(e);
}

static void on_output(exec_t *e, int k) {
    char chunk[READ_CHUNK];
    for (;;) {
        ssize_t r = read(e->s[k].fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) { close_fd(&e->s[k].fd); break; }
        feed_stream(e, k, chunk, (size_t)r);
    }
    maybe_finish(e);
    flush_out(e);
}

static void on_setup(exec_t *e) {
    char chunk[512];
    for (;;) {
        ssize_t r = read(e->err_fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return;
        if (r <= 0) { close_fd(&e->err_fd); break; }
        if (e->err_msg.len < 2048) buf_add(&e->err_msg, chunk, (size_t)r);
    }
    maybe_finish(e);
    flush_out(e);
}

static void on_children(void) {
    struct signalfd_siginfo info;
    while (read(g_sigfd, &info, sizeof info) > 0) {}
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) break;
        for (int i = 0; i < MAX_EXECS; i++) {
            exec_t *e = &g_execs[i];
            if (!e->used || e->pid != pid || e->reaped) continue;
            e->reaped = 1;
            e->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            if (!g_pidns) { kill(-pid, SIGKILL); kill_orphans(); g_sweep_until = now_ms() + DRAIN_GRACE_MS; }
            maybe_finish(e);
            flush_out(e);
        }
    }
}

static void on_control(void) {
    for (;;) {
        char byte;
        union { struct cmsghdr h; char space[CMSG_SPACE(sizeof(int) * 4)]; } ctl;
        struct iovec iov = {&byte, 1};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
        ssize_t r = recvmsg(g_control, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return;
        if (r <= 0) {  /* the client is gone: end every command, then ourselves */
            for (int i = 0; i < MAX_EXECS; i++) if (g_execs[i].used) kill_command(&g_execs[i]);
            if (!g_pidns) kill_orphans();
            _exit(0);
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *fds = (int *)CMSG_DATA(c);
            for (int k = 0; k < nfds; k++) {
                int slot = -1;
                for (int i = 0; i < MAX_EXECS && slot < 0; i++) if (!g_execs[i].used) slot = i;
                if (slot < 0) {  /* too many commands at once: say so on that socket */
                    buf_t b = {0}; const char *m = "too many concurrent commands in this sandbox";
                    frame(&b, 'F', m, strlen(m));
                    if (send(fds[k], b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* gone */ }
                    buf_free(&b); close(fds[k]); continue;
                }
                exec_t *e = &g_execs[slot];
                e->used = 1; e->sock = fds[k];
                fcntl(e->sock, F_SETFL, O_NONBLOCK);
                watch(e->sock, EPOLLIN | EPOLLRDHUP, TAG(T_SOCK, slot), EPOLL_CTL_ADD);
            }
        }
    }
}

static void check_deadlines(int64_t t) {
    if (g_sweep_until && t < g_sweep_until) kill_orphans();
    else g_sweep_until = 0;
    for (int i = 0; i < MAX_EXECS; i++) {
        exec_t *e = &g_execs[i];
        if (!e->used || e->state != 1) continue;
        if (!e->reaped && e->deadline && t >= e->deadline && !e->timed_out) {
            e->timed_out = 1; kill_command(e);
        }
        if (e->reaped && e->drain_deadline && t >= e->drain_deadline) { maybe_finish(e); flush_out(e); }
    }
}

static int next_wait_ms(void) {
    int64_t t = now_ms(), best = -1;
    for (int i = 0; i < MAX_EXECS; i++) {
        exec_t *e = &g_execs[i];
        if (!e->used || e->state != 1) continue;
        int64_t d = e->reaped ? e->drain_deadline : (e->timed_out ? 0 : e->deadline);
        if (d && (best < 0 || d < best)) best = d;
    }
    if (g_sweep_until && (best < 0 || g_sweep_until < best)) best = t + 50 < g_sweep_until ? t + 50 : g_sweep_until;
    if (best < 0) return -1;
    return best <= t ? 0 : (int)(best - t > 60000 ? 60000 : best - t);
}

static void read_filter(int fd) {
    buf_t b = {0}; char chunk[4096]; ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) buf_add(&b, chunk, (size_t)r);
    if (r < 0) die("reading the seccomp filter");
    close(fd);
    if (b.len % sizeof(struct sock_filter)) { errno = EINVAL; die("seccomp filter size"); }
    g_filter.len = (unsigned short)(b.len / sizeof(struct sock_filter));
    g_filter.filter = (struct sock_filter *)b.data;
}

int main(int argc, char **argv) {
    g_control = -1;
    int filter_fd = -1;
    const char *connect_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--control-fd") && i + 1 < argc) g_control = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--connect") && i + 1 < argc) connect_path = argv[++i];
        else if (!strcmp(argv[i], "--seccomp-fd") && i + 1 < argc) filter_fd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pidns")) g_pidns = g_drop_caps = 1;
        else if (!strcmp(argv[i], "--drop-caps")) g_drop_caps = 1;
        else {
            fprintf(stderr, "usage: hermes-exec (--control-fd N | --connect SOCKET) [--seccomp-fd M] "
                            "[--pidns] [--drop-caps]\n");
            return 2;
        }
    }
    if (connect_path) {  /* a client listening on a unix socket (e.g. bind-mounted into a container) */
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        if (strlen(connect_path) >= sizeof addr.sun_path) { errno = ENAMETOOLONG; die(connect_path); }
        strcpy(addr.sun_path, connect_path);
        g_control = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (g_control < 0 || connect(g_control, (struct sockaddr *)&addr, sizeof addr) < 0) die(connect_path);
    }
    if (g_control < 0) { fprintf(stderr, "hermes-exec: --control-fd or --connect is required\n"); return 2; }
    if (filter_fd >= 0) read_filter(filter_fd);
    FILE *cap_file = fopen("/proc/sys/kernel/cap_last_cap", "re");
    if (cap_file) {
        if (fscanf(cap_file, "%d", &g_last_cap) != 1) g_last_cap = 63;
        fclose(cap_file);
    }
    for (int i = 0; i < MAX_EXECS; i++) reset_exec(&g_execs[i]);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld; sigemptyset(&chld); sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    if (!g_pidns && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) die("PR_SET_CHILD_SUBREAPER");
    /* Commands may run as the agent's own uid (docker, gVisor): not dumpable, the agent cannot
     * be traced or read through /proc by them. Each command is dumpable again (below). */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) die("PR_SET_DUMPABLE");
    if ((g_sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) die("signalfd");
    if ((g_epoll = epoll_create1(EPOLL_CLOEXEC)) < 0) die("epoll_create1");
    fcntl(g_control, F_SETFD, FD_CLOEXEC);
    watch(g_control, EPOLLIN, TAG(T_CONTROL, 0), EPOLL_CTL_ADD);
    watch(g_sigfd, EPOLLIN, TAG(T_SIGNAL, 0), EPOLL_CTL_ADD);
    {
        unsigned char hello[8]; put32(hello, PROTOCOL_VERSION); put32(hello + 4, (uint32_t)getpid());
        buf_t b = {0}; frame(&b, 'H', hello, sizeof hello);
        if (send(g_control, b.data, b.len, MSG_NOSIGNAL) != (ssize_t)b.len) die("sending hello");
        buf_free(&b);
    }
    struct epoll_event events[64];
    for (;;) {
        int n = epoll_wait(g_epoll, events, 64, next_wait_ms());
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int k = 0; k < n; k++) {
            uint64_t tag = events[k].data.u64;
            uint32_t kind = (uint32_t)(tag >> 56), i = (uint32_t)tag;
            if (kind == T_CONTROL) { on_control(); continue; }
            if (kind == T_SIGNAL) { on_children(); continue; }
            exec_t *e = &g_execs[i];
            if (!e->used || ((tag >> 32) & 0xffffff) != (e->gen & 0xffffff)) continue;
            if (0) {}
            else if (kind == T_SOCK) on_sock(e, events[k].events);
            else if (kind == T_OUT && e->s[S_OUT].fd >= 0) on_output(e, S_OUT);
            else if (kind == T_ERR && e->s[S_ERR].fd >= 0) on_output(e, S_ERR);
            else if (kind == T_SETUP && e->err_fd >= 0) on_setup(e);
            else if (kind == T_IN) { pump_stdin(e); flush_out(e); }
        }
        check_deadlines(now_ms());
    }
}

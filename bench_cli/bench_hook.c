/* bench-hook EVENT: `bench hook EVENT` as a compiled program (docs/agents.md).

An agent waits for its hooks: Claude Code runs one at every turn's end, so a hook that
takes an interpreter's start (20-60 ms) delays every wake handed over at a turn's end
by that much. This program does what bench_cli/entry.py's `hook` does, in about a
millisecond: read the event's JSON from standard input (at most 256 KiB; a bigger one
is sent empty, as the Python client does), check that the daemon's socket is served by
our own uid, send one `agent/report` request, and print the answer's `output` (a Stop
hook's next instruction, an approval's decision), if any.

Exit codes: 0 when the daemon took the report, 1 otherwise with `bench: MESSAGE [CODE]`
on standard error. Never 2: an agent reads a hook's exit 2 as "block this".

`./run` compiles it into the venv's bin directory when a C compiler is there; the daemon
uses it for adapter sessions when it finds it beside `bench`, else `bench hook`. The
answer is parsed by a small JSON scanner that only looks for the top-level keys it needs
and skips everything else; any answer it cannot read is an error, never a guess. */

#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PAYLOAD_MAX (256 * 1024) /* bench_cli.entry.HOOK_PAYLOAD_BYTES */
#define ANSWER_MAX (4 * 1024 * 1024)

/* bench_cli.entry.HOOK_EVENTS (a unit test holds the two equal) */
static const char *EVENTS[] = {"start", "prompt", "stop", "interrupt", "stop-failure",
                               "permission", "notification", "end", "tool", NULL};

static int fail(const char *code, const char *fmt, const char *arg) {
    fputs("bench: ", stderr);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " [%s]\n", code);
    return 1;
}

/* ------------------------------------------------------------ a growing buffer */

typedef struct {
    char *b;
    size_t n, cap;
} buf;

static int put(buf *o, const char *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        size_t cap = (o->cap ? o->cap : 4096);
        while (cap < o->n + n + 1) cap *= 2;
        char *b = realloc(o->b, cap);
        if (!b) return -1;
        o->b = b;
        o->cap = cap;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
    o->b[o->n] = 0;
    return 0;
}

/* A JSON string of raw bytes: what is not valid UTF-8 the daemon refuses by itself
   (as it refuses the Python client's surrogate escapes), so bytes pass through; only
   the quote, the backslash and control characters are escaped. */
static int put_json_string(buf *o, const char *s, size_t n) {
    if (put(o, "\"", 1)) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            if (put(o, esc, 2)) return -1;
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            if (put(o, esc, 6)) return -1;
        } else if (put(o, (const char *)&c, 1)) {
            return -1;
        }
    }
    return put(o, "\"", 1);
}

/* ------------------------------------------------------------ the answer's scanner */

typedef struct {
    const char *p, *end;
} scan;

static void ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        *v <<= 4;
        if (c >= '0' && c <= '9') *v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') *v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    return 0;
}

static int put_utf8(buf *o, unsigned cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return put(o, u, n);
}

/* A string at s->p (at its opening quote), decoded into `out` when out is not NULL. */
static int string(scan *s, buf *out) {
    if (s->p >= s->end || *s->p != '"') return -1;
    s->p++;
    while (s->p < s->end) {
        char c = *s->p++;
        if (c == '"') return 0;
        if (c != '\\') {
            if (out && put(out, &c, 1)) return -1;
            continue;
        }
        if (s->p >= s->end) return -1;
        char e = *s->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            if (out && put(out, &to[simple - "\"\\/bfnrt"], 1)) return -1;
            continue;
        }
        if (e != 'u' || s->end - s->p < 4) return -1;
        unsigned cp;
        if (hex4(s->p, &cp)) return -1;
        s->p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && s->end - s->p >= 6 && s->p[0] == '\\' && s->p[1] == 'u') {
            unsigned lo;
            if (hex4(s->p + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s->p += 6;
            }
        }
        if (out && put_utf8(out, cp)) return -1;
    }
    return -1;
}

/* Skip any value (nesting bounded: the daemon's answers are shallow). */
static int skip(scan *s, int depth) {
    ws(s);
    if (s->p >= s->end || depth > 64) return -1;
    char c = *s->p;
    if (c == '"') return string(s, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == close) { s->p++; return 0; }
        for (;;) {
            if (c == '{') {
                ws(s);
                if (string(s, NULL)) return -1;
                ws(s);
                if (s->p >= s->end || *s->p++ != ':') return -1;
            }
            if (skip(s, depth + 1)) return -1;
            ws(s);
            if (s->p >= s->end) return -1;
            if (*s->p == ',') { s->p++; continue; }
            if (*s->p == close) { s->p++; return 0; }
            return -1;
        }
    }
    while (s->p < s->end && strchr(",}] \t\r\n", *s->p) == NULL) s->p++; /* number, literal */
    return 0;
}

typedef struct {
    int ok;          /* 1 unless "ok": false */
    int has_output;  /* "output" is a string */
    buf output, code, message;
} answer;

/* The keys of an object (the answer, or its "error"), decoding those named. */
static int object(scan *s, answer *a, int in_error) {
    ws(s);
    if (s->p >= s->end || *s->p++ != '{') return -1;
    ws(s);
    if (s->p < s->end && *s->p == '}') { s->p++; return 0; }
    for (;;) {
        buf key = {0};
        ws(s);
        if (string(s, &key)) { free(key.b); return -1; }
        ws(s);
        if (s->p >= s->end || *s->p++ != ':') { free(key.b); return -1; }
        ws(s);
        const char *k = key.b ? key.b : "";
        int r;
        if (!in_error && strcmp(k, "ok") == 0 && s->end - s->p >= 5 && memcmp(s->p, "false", 5) == 0) {
            a->ok = 0;
            r = skip(s, 1);
        } else if (!in_error && strcmp(k, "output") == 0 && s->p < s->end && *s->p == '"') {
            a->has_output = 1;
            r = string(s, &a->output);
        } else if (!in_error && strcmp(k, "error") == 0 && s->p < s->end && *s->p == '{') {
            r = object(s, a, 1);
        } else if (in_error && strcmp(k, "code") == 0 && s->p < s->end && *s->p == '"') {
            r = string(s, &a->code);
        } else if (in_error && strcmp(k, "message") == 0 && s->p < s->end && *s->p == '"') {
            r = string(s, &a->message);
        } else {
            r = skip(s, 1);
        }
        free(key.b);
        if (r) return -1;
        ws(s);
        if (s->p >= s->end) return -1;
        if (*s->p == ',') { s->p++; continue; }
        if (*s->p == '}') { s->p++; return 0; }
        return -1;
    }
}

/* ------------------------------------------------------------ the report */

int main(int argc, char **argv) {
    if (argc != 2) return fail("usage", "%s", "usage: bench-hook EVENT (the event's JSON on standard input)");
    int known = 0;
    for (const char **e = EVENTS; *e; e++) known |= strcmp(*e, argv[1]) == 0;
    if (!known) return fail("usage", "unknown hook event %s", argv[1]);

    /* The payload: standard input unless it is a terminal; too big is sent empty. */
    buf in = {0};
    if (!isatty(0)) {
        char chunk[65536];
        ssize_t r;
        while ((r = read(0, chunk, sizeof chunk)) != 0) {
            if (r < 0) {
                if (errno == EINTR) continue;
                break;
            }
            if (in.n <= PAYLOAD_MAX && put(&in, chunk, (size_t)r)) return fail("no-memory", "%s", "out of memory");
        }
        if (in.n > PAYLOAD_MAX) in.n = 0;
    }

    const char *dir = getenv("BENCH_DIR");
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (!dir || !*dir) return fail("no-daemon", "%s", "BENCH_DIR is not set: bench-hook runs inside a bench session");
    if ((size_t)snprintf(path, sizeof path, "%s/benchd.sock", dir) >= sizeof path)
        return fail("socket-path-too-long", "the socket path under %s is too long for AF_UNIX", dir);

    buf req = {0};
    const char *token = getenv("BENCH_TOKEN");
    if (put(&req, "{\"verb\":\"agent/report\"", 22)) return 1;
    if (token && *token) {
        if (put(&req, ",\"token\":", 9) || put_json_string(&req, token, strlen(token))) return 1;
    }
    if (put(&req, ",\"event\":", 9) || put_json_string(&req, argv[1], strlen(argv[1])) ||
        put(&req, ",\"payload\":", 11) || put_json_string(&req, in.b ? in.b : "", in.n) ||
        put(&req, ",\"id\":1}\n", 9))
        return fail("no-memory", "%s", "out of memory");

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return fail("no-daemon", "no daemon is running for %s: start it with `bench up`", dir);
    /* Whoever binds the path answers: check it runs as us before the token is sent. */
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return fail("no-daemon", "cannot reach the daemon at %s", path);
    if (cred.uid != getuid())
        return fail("daemon-not-ours", "the socket %s is served by another uid: refusing to talk to it; nothing was sent", path);
    for (size_t off = 0; off < req.n;) {
        ssize_t w = write(fd, req.b + off, req.n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return fail("protocol", "the connection to the daemon broke: %s", strerror(errno));
        off += (size_t)w;
    }

    /* One answer line (an approval's waits for `bench approve` as long as the daemon
       lets it; the agent's own hook timeout bounds us). */
    buf ans = {0};
    for (;;) {
        char chunk[65536];
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return fail("protocol", "%s", "the daemon closed the connection before answering");
        if (put(&ans, chunk, (size_t)r)) return fail("no-memory", "%s", "out of memory");
        if (memchr(chunk, '\n', (size_t)r)) break;
        if (ans.n > ANSWER_MAX) return fail("protocol", "%s", "the daemon's answer is too long");
    }
    close(fd);
    answer a = {.ok = 1};
    scan s = {ans.b, ans.b + (strchr(ans.b, '\n') - ans.b)};
    if (object(&s, &a, 0)) return fail("protocol", "%s", "the daemon's answer is not the JSON expected");
    if (!a.ok)
        return fail(a.code.b ? a.code.b : "protocol", "%s", a.message.b ? a.message.b : "refused");
    if (a.has_output && a.output.n) {
        fwrite(a.output.b, 1, a.output.n, stdout);
        fputc('\n', stdout);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

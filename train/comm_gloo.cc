// comm_gloo.cc: Gloo collectives for CPU ranks on any number of machines (see comm_gloo.h). The store below
// carries only the rendezvous (each rank's pair addresses) and the failure roll call; Gloo's TCP pairs carry
// every collective.
#include "comm_gloo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 1;
}

// ---- the store: rank 0 serves a key -> bytes map; GET blocks until the key is set.
// Frames: op (1 byte: 'S' set, 'G' get, 'C' check), key length (u32), key, [value length (u32), value].
// Replies: 'S' -> 1 byte; 'G' -> length (u32) + value; 'C' -> 1 byte (1 = present).
static bool io_all(int fd, void *p, size_t n, bool wr) {
    char *c = (char *)p;
    while (n) {
        ssize_t k = wr ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            return false;
        }
        c += k, n -= (size_t)k;
    }
    return true;
}
static bool send_str(int fd, const void *p, uint32_t n) { return io_all(fd, &n, 4, true) && io_all(fd, (void *)p, n, true); }
static bool recv_str(int fd, std::string &s) {
    uint32_t n;
    if (!io_all(fd, &n, 4, false)) return false;
    s.resize(n);
    return io_all(fd, &s[0], n, false);
}

struct StoreServer {
    int fd = -1;
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::string> kv;

    void serve(int c) { // one thread per client connection
        for (;;) {
            char op;
            std::string key, val;
            if (!io_all(c, &op, 1, false) || !recv_str(c, key)) break;
            if (op == 'S') {
                if (!recv_str(c, val)) break;
                { std::lock_guard<std::mutex> l(mu); kv[key] = val; }
                cv.notify_all();
                char ok = 1;
                if (!io_all(c, &ok, 1, true)) break;
            } else if (op == 'G') {
                std::unique_lock<std::mutex> l(mu);
                cv.wait(l, [&] { return kv.count(key) > 0; });
                val = kv[key];
                l.unlock();
                if (!send_str(c, val.data(), (uint32_t)val.size())) break;
            } else if (op == 'C') {
                char has;
                { std::lock_guard<std::mutex> l(mu); has = kv.count(key) > 0; }
                if (!io_all(c, &has, 1, true)) break;
            } else break;
        }
        close(c);
    }
};

class TcpStore : public gloo::rendezvous::Store {
  public:
    int fd = -1;
    std::mutex mu; // one request at a time on the connection
    void set(const std::string &key, const std::vector<char> &data) override {
        std::lock_guard<std::mutex> l(mu);
        char op = 'S', ok;
        if (!io_all(fd, &op, 1, true) || !send_str(fd, key.data(), (uint32_t)key.size()) ||
            !send_str(fd, data.data(), (uint32_t)data.size()) || !io_all(fd, &ok, 1, false))
            throw std::runtime_error("the rendezvous store (rank 0) is gone");
    }
    std::vector<char> get(const std::string &key) override {
        std::lock_guard<std::mutex> l(mu);
        char op = 'G';
        std::string v;
        if (!io_all(fd, &op, 1, true) || !send_str(fd, key.data(), (uint32_t)key.size()) || !recv_str(fd, v))
            throw std::runtime_error("the rendezvous store (rank 0) is gone or did not answer within the timeout");
        return std::vector<char>(v.begin(), v.end());
    }
    bool check(const std::string &key) {
        std::lock_guard<std::mutex> l(mu);
        char op = 'C', has;
        if (!io_all(fd, &op, 1, true) || !send_str(fd, key.data(), (uint32_t)key.size()) || !io_all(fd, &has, 1, false))
            throw std::runtime_error("the rendezvous store (rank 0) is gone");
        return has != 0;
    }
    void wait(const std::vector<std::string> &keys) override {
        for (auto &k : keys) get(k);
    }
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override { wait(keys); }
};

struct GlooComm {
    int rank, world;
    double timeout_s;
    StoreServer *server = nullptr; // rank 0 (left running until exit: peers may still ask it)
    TcpStore store;
    std::shared_ptr<gloo::rendezvous::Context> ctx;
};

static int connect_retry(const char *addr, int port, double timeout_s, char *err, size_t errlen) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        struct addrinfo hints = {}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        int gai = getaddrinfo(addr, ps, &hints, &res);
        if (gai) return -fail(err, errlen, "cannot resolve MASTER_ADDR %s: %s", addr, gai_strerror(gai));
        int fd = -1;
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) close(fd), fd = -1;
        }
        freeaddrinfo(res);
        if (fd >= 0) return fd;
        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (el > timeout_s)
            return -fail(err, errlen, "no rendezvous store at %s:%d after %.0f s (is rank 0 running? MASTER_ADDR right?)",
                         addr, port, el);
        usleep(100 * 1000); // rank 0 may not listen yet
    }
}

// The local address that routes to addr (a UDP connect sends nothing): the pairs listen there.
static std::string local_ip_toward(const char *addr, int port) {
    struct addrinfo hints = {}, *res = nullptr;
    hints.ai_socktype = SOCK_DGRAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    std::string out;
    if (getaddrinfo(addr, ps, &hints, &res) || !res) return out;
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char buf[INET6_ADDRSTRLEN] = "";
    if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen) && !getsockname(fd, (struct sockaddr *)&ss, &sl)) {
        const void *a = ss.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
                                                : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (inet_ntop(ss.ss_family, a, buf, sizeof buf)) out = buf;
    }
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return out;
}

extern "C" GlooComm *gloo_comm_init(int rank, int world, const char *addr, int store_port, const char *generation,
                                    double timeout_s, char *err, size_t errlen) {
    GlooComm *g = new GlooComm;
    g->rank = rank, g->world = world, g->timeout_s = timeout_s;
    if (rank == 0) {
        int fd = socket(AF_INET6, SOCK_STREAM, 0), one = 1, zero = 0;
        struct sockaddr_in6 sa = {};
        sa.sin6_family = AF_INET6, sa.sin6_addr = in6addr_any, sa.sin6_port = htons((uint16_t)store_port);
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 1024)) {
            fail(err, errlen, "rank 0 cannot serve the rendezvous store on port %d: %s (set GDN_STORE_PORT)", store_port,
                 strerror(errno));
            delete g;
            return nullptr;
        }
        g->server = new StoreServer;
        g->server->fd = fd;
        g->server->kv["generation"] = generation;
        StoreServer *s = g->server;
        std::thread([s] {
            for (;;) {
                int c = accept(s->fd, nullptr, nullptr);
                if (c < 0) {
                    if (errno == EINTR || errno == ECONNABORTED) continue;
                    return;
                }
                std::thread([s, c] { s->serve(c); }).detach();
            }
        }).detach();
    }
    // a store of an earlier attempt (its rank 0 not yet gone after a failure) is not ours: wait for this one
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        int fd = left > 0 ? connect_retry(rank == 0 ? "127.0.0.1" : addr, store_port, left, err, errlen) : -1;
        if (fd < 0) {
            if (left <= 0) fail(err, errlen, "no rendezvous store of attempt %s at %s:%d within the timeout", generation, addr, store_port);
            delete g;
            return nullptr;
        }
        struct timeval tv = {(time_t)timeout_s, (suseconds_t)((timeout_s - (time_t)timeout_s) * 1e6)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv); // a GET that never comes fails, not hangs
        g->store.fd = fd;
        try {
            std::vector<char> gen = g->store.get("generation");
            if (std::string(gen.begin(), gen.end()) == generation) break;
        } catch (const std::exception &) {
        }
        close(fd);
        g->store.fd = -1;
        usleep(200 * 1000);
    }
    try {
        gloo::transport::tcp::attr attr;
        const char *ifname = getenv("GLOO_SOCKET_IFNAME");
        if (ifname && *ifname) attr.iface = ifname;
        else attr.hostname = local_ip_toward(addr, store_port);
        if (attr.iface.empty() && attr.hostname.empty()) attr.hostname = "127.0.0.1";
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
        g->ctx->setTimeout(std::chrono::milliseconds((long long)(timeout_s * 1000)));
        g->ctx->connectFullMesh(g->store, dev);
    } catch (const std::exception &e) {
        fail(err, errlen, "Gloo rendezvous of %d ranks failed: %s", world, e.what());
        delete g;
        return nullptr;
    }
    return g;
}

#define GUARD(opname, ...)                                                                                     \
    try {                                                                                                        \
        if (!g->ctx) return fail(err, errlen, "%s: the channel is closed", opname);                            \
        __VA_ARGS__;                                                                                             \
        return 0;                                                                                                \
    } catch (const std::exception &e) {                                                                         \
        return fail(err, errlen, "%s: %s", opname, e.what());                                                  \
    }

static void sum_f32(void *c, const void *a, const void *b, size_t n) { gloo::sum<float>(c, a, b, n); }

extern "C" int gloo_allreduce_sum(GlooComm *g, float *buf, size_t n, char *err, size_t errlen) {
    GUARD("all-reduce", {
        gloo::AllreduceOptions o(g->ctx);
        o.setOutput(buf, n);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING); // fixed order per world size; all ranks equal
        o.setReduceFunction(sum_f32);
        gloo::allreduce(o);
    })
}

extern "C" int gloo_reduce_sum(GlooComm *g, float *buf, size_t n, int root, char *err, size_t errlen) {
    GUARD("reduce", {
        gloo::ReduceOptions o(g->ctx);
        o.setOutput(buf, n);
        o.setRoot(root);
        o.setReduceFunction(sum_f32);
        gloo::reduce(o);
    })
}

extern "C" int gloo_broadcast(GlooComm *g, void *buf, size_t bytes, int root, char *err, size_t errlen) {
    GUARD("broadcast", {
        gloo::BroadcastOptions o(g->ctx);
        o.setOutput((char *)buf, bytes);
        o.setRoot(root);
        gloo::broadcast(o);
    })
}

extern "C" int gloo_allgather(GlooComm *g, const void *in, void *out, size_t bytes, char *err, size_t errlen) {
    GUARD("all-gather", {
        gloo::AllgatherOptions o(g->ctx);
        o.setInput((char *)in, bytes);
        o.setOutput((char *)out, bytes * (size_t)g->world);
        gloo::allgather(o);
    })
}

extern "C" int gloo_barrier(GlooComm *g, char *err, size_t errlen) {
    GUARD("barrier", {
        gloo::BarrierOptions o(g->ctx);
        gloo::barrier(o);
    })
}

extern "C" int gloo_comm_who_failed(GlooComm *g, double grace_s, int *missing) {
    g->ctx.reset(); // closes the pairs: peers blocked on this rank fail now instead of at their timeout
    try {
        g->store.set("alive/" + std::to_string(g->rank), std::vector<char>(1, 1));
        auto t0 = std::chrono::steady_clock::now();
        int n;
        for (;;) {
            n = 0;
            for (int r = 0; r < g->world; r++) n += missing[r] = !g->store.check("alive/" + std::to_string(r));
            double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!n || el > grace_s) return n;
            usleep(100 * 1000);
        }
    } catch (const std::exception &) {
        return -1;
    }
}

extern "C" void gloo_comm_free(GlooComm *g) {
    if (!g) return;
    g->ctx.reset();
    if (g->store.fd >= 0) close(g->store.fd);
    if (g->server) shutdown(g->server->fd, SHUT_RDWR); // stops accepting; its threads end with the process
    delete g;
}

// Closed-loop HTTP/1.1 load generator for the benchmark runner.
//
// Why C: on a 2-core machine the client competes with the server for CPU, and a Python
// client spends tens of microseconds per request. This one sends a pre-built request
// (the runner writes it, binary tensor extension included) over N keep-alive connections
// from one epoll thread and costs a few microseconds per request.
//
// Usage: bench_loadgen PORT REQUEST_FILE CONNECTIONS DURATION_S MIN_REQUESTS [sse]
// Prints one JSON object: completed, errors, elapsed_s, events (SSE "\n\n" separators),
// cpu_user_s, cpu_sys_s, first_error, hist ([bucket, count] with bucket =
// floor(200 * log10(latency_ns)), about 1.2% wide).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS 4000
#define HDR_MAX 16384
#define RBUF (256 * 1024)

enum State { HEADERS, BODY_LEN, CHUNK_SIZE, CHUNK_DATA, CHUNK_CRLF, CHUNK_TRAILER };

typedef struct {
  int fd;
  size_t sent;  // bytes of the request written so far
  int64_t t_start;
  enum State st;
  char hdr[HDR_MAX];
  size_t hdr_len;
  uint64_t remaining;  // body bytes (BODY_LEN) or chunk bytes (CHUNK_DATA) left
  int status;
  char line[64];  // chunk-size line being read
  size_t line_len;
  char prev;  // last body byte, to find "\n\n" across reads
  int active;
  uint64_t resp_events;  // events of the response in progress, for the timeout report
} Conn;

static const char* g_req;
static size_t g_req_len;
static int g_sse;
static uint64_t g_hist[NBUCKETS];
static uint64_t g_completed, g_errors, g_events;
static char g_first_error[512];

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char* what) {
  perror(what);
  exit(2);
}

static int connect_one(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&a, sizeof(a)) < 0) die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

static void record_error(const char* msg, size_t n) {
  g_errors++;
  if (g_first_error[0] == 0) {
    if (n >= sizeof(g_first_error)) n = sizeof(g_first_error) - 1;
    for (size_t i = 0; i < n; i++) g_first_error[i] = (msg[i] == '"' || msg[i] < 32) ? ' ' : msg[i];
  }
}

// Returns 1 once the header block is complete and parsed.
static int parse_headers(Conn* c) {
  char* end = memmem(c->hdr, c->hdr_len, "\r\n\r\n", 4);
  if (!end) return 0;
  *end = 0;
  c->status = atoi(c->hdr + 9);
  c->remaining = 0;
  c->st = BODY_LEN;
  for (char* p = c->hdr; *p; p++) {
    if (strncasecmp(p, "\ncontent-length:", 16) == 0) c->remaining = strtoull(p + 16, NULL, 10);
    if (strncasecmp(p, "\ntransfer-encoding: chunked", 27) == 0) c->st = CHUNK_SIZE;
  }
  c->line_len = 0;
  c->prev = 0;
  return 1;
}

static void finish(Conn* c, int64_t t) {
  if (c->status != 200) {
    record_error(c->hdr, strlen(c->hdr));
  } else {
    g_completed++;
    int64_t lat = t - c->t_start;
    int b = lat > 0 ? (int)(200.0 * log10((double)lat)) : 0;
    if (b >= NBUCKETS) b = NBUCKETS - 1;
    g_hist[b]++;
  }
  c->active = 0;
}

static void scan_events(Conn* c, const char* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '\n' && c->prev == '\n') {
      g_events++;
      c->resp_events++;
    }
    c->prev = p[i];
  }
}

// Feeds received bytes through the response state machine.
static void consume(Conn* c, const char* p, size_t n, int64_t t) {
  while (n > 0 && c->active) {
    if (c->st == HEADERS) {
      size_t take = n < HDR_MAX - 1 - c->hdr_len ? n : HDR_MAX - 1 - c->hdr_len;
      size_t old = c->hdr_len;
      memcpy(c->hdr + old, p, take);
      c->hdr_len += take;
      if (!parse_headers(c)) {
        if (c->hdr_len >= HDR_MAX - 1) die("response header too large");
        return;
      }
      size_t used = (size_t)(strlen(c->hdr) + 4 - old);
      p += used;
      n -= used;
      if (c->st == BODY_LEN && c->remaining == 0) finish(c, t);
    } else if (c->st == BODY_LEN) {
      size_t take = n < c->remaining ? n : c->remaining;
      size_t at = strlen(c->hdr);
      if (c->status != 200 && at < HDR_MAX / 2) {
        // Keep the start of an error body for the report.
        size_t keep = take < 400 ? take : 400;
        c->hdr[at] = ' ';
        memcpy(c->hdr + at + 1, p, keep);
        c->hdr[at + 1 + keep] = 0;
      }
      c->remaining -= take;
      p += take;
      n -= take;
      if (c->remaining == 0) finish(c, t);
    } else if (c->st == CHUNK_SIZE || c->st == CHUNK_TRAILER) {
      char ch = *p++;
      n--;
      if (c->line_len < sizeof(c->line) - 1) c->line[c->line_len++] = ch;
      if (ch != '\n') continue;
      c->line[c->line_len] = 0;
      int blank = c->line_len <= 2;
      c->line_len = 0;
      if (c->st == CHUNK_TRAILER) {
        if (blank) finish(c, t);
        continue;
      }
      c->remaining = strtoull(c->line, NULL, 16);
      c->st = c->remaining == 0 ? CHUNK_TRAILER : CHUNK_DATA;
    } else if (c->st == CHUNK_DATA) {
      size_t take = n < c->remaining ? n : c->remaining;
      if (g_sse) scan_events(c, p, take);
      c->remaining -= take;
      p += take;
      n -= take;
      if (c->remaining == 0) {
        c->st = CHUNK_CRLF;
        c->line_len = 0;
      }
    } else {  // CHUNK_CRLF
      p++;
      n--;
      if (++c->line_len == 2) {
        c->st = CHUNK_SIZE;
        c->line_len = 0;
      }
    }
  }
}

static void start_request(Conn* c, int ep) {
  c->sent = 0;
  c->hdr_len = 0;
  c->st = HEADERS;
  c->active = 1;
  c->resp_events = 0;
  c->t_start = now_ns();
  ssize_t w = send(c->fd, g_req, g_req_len, MSG_NOSIGNAL);
  if (w > 0) c->sent = (size_t)w;
  if (w < 0 && errno != EAGAIN) die("send");
  if (c->sent < g_req_len) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
  }
}

static void load_request(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) die("request file");
  struct stat st;
  fstat(fileno(f), &st);
  char* buf = malloc((size_t)st.st_size);
  if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) die("read request");
  fclose(f);
  g_req = buf;
  g_req_len = (size_t)st.st_size;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s PORT REQUEST_FILE CONNECTIONS DURATION_S MIN_REQUESTS [sse]\n",
            argv[0]);
    return 2;
  }
  int port = atoi(argv[1]);
  load_request(argv[2]);
  int nconn = atoi(argv[3]);
  double duration = atof(argv[4]);
  uint64_t min_requests = strtoull(argv[5], NULL, 10);
  g_sse = argc > 6 && strcmp(argv[6], "sse") == 0;

  int ep = epoll_create1(0);
  Conn* conns = calloc((size_t)nconn, sizeof(Conn));
  for (int i = 0; i < nconn; i++) {
    conns[i].fd = connect_one(port);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
  }
  struct rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  int64_t t0 = now_ns(), deadline = t0 + (int64_t)(duration * 1e9), t_last = t0;
  for (int i = 0; i < nconn; i++) start_request(&conns[i], ep);
  int inflight = nconn;
  static char rbuf[RBUF];
  struct epoll_event evs[256];
  while (inflight > 0) {
    int k = epoll_wait(ep, evs, 256, 30000);
    if (k == 0) {
      for (int i = 0; i < nconn; i++) {
        Conn* c = &conns[i];
        fprintf(stderr, "conn %d active=%d state=%d events=%llu line=%.*s hdr=%.200s\n", i,
                c->active, c->st, (unsigned long long)c->resp_events, (int)c->line_len, c->line,
                c->hdr);
      }
      die("timeout: no response for 30 s");
    }
    if (k < 0 && errno == EINTR) continue;
    for (int e = 0; e < k; e++) {
      Conn* c = evs[e].data.ptr;
      if ((evs[e].events & EPOLLOUT) && c->sent < g_req_len) {
        ssize_t w = send(c->fd, g_req + c->sent, g_req_len - c->sent, MSG_NOSIGNAL);
        if (w > 0) c->sent += (size_t)w;
        if (w < 0 && errno != EAGAIN) die("send");
        if (c->sent == g_req_len) {
          struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
          epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
      }
      if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      ssize_t r = recv(c->fd, rbuf, sizeof(rbuf), 0);
      if (r < 0 && errno == EAGAIN) continue;
      if (r <= 0) die("server closed the connection");
      int64_t t = now_ns();
      consume(c, rbuf, (size_t)r, t);
      if (c->active) continue;
      t_last = t;
      if (t < deadline || g_completed + g_errors < min_requests) {
        start_request(c, ep);
      } else {
        inflight--;
      }
    }
  }
  struct rusage ru1;
  getrusage(RUSAGE_SELF, &ru1);
  double us = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
              (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6;
  double sy = (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
              (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
  printf("{\"completed\":%llu,\"errors\":%llu,\"elapsed_s\":%.9f,\"events\":%llu,",
         (unsigned long long)g_completed, (unsigned long long)g_errors, (t_last - t0) / 1e9,
         (unsigned long long)g_events);
  printf("\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,\"first_error\":\"%s\",\"hist\":[", us, sy,
         g_first_error);
  int first = 1;
  for (int b = 0; b < NBUCKETS; b++) {
    if (!g_hist[b]) continue;
    printf("%s[%d,%llu]", first ? "" : ",", b, (unsigned long long)g_hist[b]);
    first = 0;
  }
  printf("]}\n");
  return 0;
}

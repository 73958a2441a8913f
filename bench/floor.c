// The floor of a paced reply on this machine (bench/rpc-stream.py --floor): the least any agent
// must do per delta a model sends, with nothing of an agent in it. It asks tau-mock-llm for its
// scripted reply and, for each wake-up, makes the three calls tau makes per paced delta: one
// epoll_wait, one recv, one write of the bytes to stdout. No HTTP, SSE or JSON is decoded, so
// its CPU per delta is the kernel's part of a delta (the wake-up, the loopback read and its
// ACK, the write and the client's wake-up) plus almost nothing; tau's figure beside it, less
// this one, is what tau's own code costs. At the end it writes an `agent_end` line, which the
// bench waits for.
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: floor PORT\n");
    return 2;
  }
  int sock = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)atoi(argv[1]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
    perror("connect");
    return 1;
  }
  const char *body =
      "{\"model\":\"mock-1\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  char request[1024];
  int length = snprintf(request, sizeof request,
                        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Content-Type: application/json\r\nAuthorization: Bearer k\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                        strlen(body), body);
  if (write(sock, request, (size_t)length) != length) {
    perror("write");
    return 1;
  }
  int poller = epoll_create1(0);
  struct epoll_event interest = {.events = EPOLLIN, .data.fd = sock};
  epoll_ctl(poller, EPOLL_CTL_ADD, sock, &interest);
  static char buf[65536];
  for (;;) {
    struct epoll_event ready;
    if (epoll_wait(poller, &ready, 1, -1) < 0) continue;
    ssize_t got = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (got == 0) break;
    if (got < 0) continue;
    if (write(1, buf, (size_t)got) < 0) return 1;
  }
  const char end[] = "\n{\"type\":\"agent_end\"}\n";
  return write(1, end, sizeof end - 1) < 0;
}

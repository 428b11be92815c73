// A loopback TCP port that nothing listens on (yet), for tests that start a
// server later on a known address. Another process may take it meanwhile;
// tests use it only where the server must come up on the same address twice.
#ifndef SPINTUNE_TESTS_TESTING_FREE_PORT_H_
#define SPINTUNE_TESTS_TESTING_FREE_PORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace spintune::testing {

inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_FREE_PORT_H_

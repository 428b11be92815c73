// A loopback TCP port that nothing listens on (yet), for tests that start a
// server later on a known address (a tuner restarted on the address its
// agents keep dialling). Tests that need no fixed address bind port 0.
//
// The port is drawn below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), so no outgoing connection and
// no server bound to port 0 is ever given it while the test's server is
// down between two runs: only another explicit bind can take it, and the
// draw is random (with a bind check) so two tests rarely draw the same one.
#ifndef SPINTUNE_TESTS_TESTING_FREE_PORT_H_
#define SPINTUNE_TESTS_TESTING_FREE_PORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace spintune::testing {

// Whether nothing is bound to loopback `port` now.
inline bool PortIsFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // as gRPC binds
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return free;
}

inline int FreePort() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int low = 10000, high = ephemeral_low > low + 1000 ? ephemeral_low - 1 : 30999;
  std::random_device seed;
  std::mt19937 rng(seed());
  std::uniform_int_distribution<int> draw(low, high);
  for (int tries = 0; tries < 1000; ++tries) {
    const int port = draw(rng);
    if (PortIsFree(port)) return port;
  }
  return 0;  // the server then binds an ephemeral port, and the test says why it failed
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_FREE_PORT_H_

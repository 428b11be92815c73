// A loopback TCP proxy for fault tests: forwards every connection made to
// its port to 127.0.0.1:target_port, and can cut all of them at once (both
// directions shut down), as a network drop would.
#ifndef SPINTUNE_TESTS_TESTING_TCP_PROXY_H_
#define SPINTUNE_TESTS_TESTING_TCP_PROXY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace spintune::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_, 64);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~TcpProxy() {
    stop_ = true;
    acceptor_.join();
    DropAll();
    for (auto& t : pumps_) t.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  // Cuts every open connection; new ones are accepted as before.
  void DropAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_) shutdown(fd, SHUT_RDWR);
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      const int upstream = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(client);
        close(upstream);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      open_.push_back(client);
      open_.push_back(upstream);
      auto left = std::make_shared<std::atomic<int>>(2);
      pumps_.emplace_back([this, client, upstream, left] { Pump(client, upstream, left); });
      pumps_.emplace_back([this, client, upstream, left] { Pump(upstream, client, left); });
    }
  }
  // One direction; the connection is closed when both have ended.
  void Pump(int from, int to, std::shared_ptr<std::atomic<int>> left) {
    char buf[64 << 10];
    pollfd p{from, POLLIN, 0};
    while (!stop_) {
      const int r = poll(&p, 1, 100);
      if (r < 0) break;
      if (r == 0) continue;
      const ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      ssize_t done = 0;
      while (done < n) {
        const ssize_t w = send(to, buf + done, static_cast<size_t>(n - done), MSG_NOSIGNAL);
        if (w <= 0) break;
        done += w;
      }
      if (done < n) break;
    }
    shutdown(from, SHUT_RDWR);
    shutdown(to, SHUT_RDWR);
    if (--*left > 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : {from, to}) {
      close(fd);
      for (auto it = open_.begin(); it != open_.end(); ++it) {
        if (*it == fd) {
          open_.erase(it);
          break;
        }
      }
    }
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> pumps_;
};

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_TCP_PROXY_H_

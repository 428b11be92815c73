// Throw-away certificates for TLS tests, made with the openssl command line:
// a CA, a server certificate for localhost/127.0.0.1, a client certificate
// signed by the CA, and one signed by another CA.
#ifndef SPINTUNE_TESTS_TESTING_TEST_CERTS_H_
#define SPINTUNE_TESTS_TESTING_TEST_CERTS_H_

#include <cstdlib>
#include <string>

namespace spintune::testing {

struct TestCerts {
  std::string ca, server_cert, server_key, client_cert, client_key, other_ca, rogue_cert,
      rogue_key;
};

// False when openssl failed (the test should fail, not skip: it is a
// dependency the Makefile installs).
inline bool MakeTestCerts(const std::string& dir, TestCerts* c) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + dir + "'; exec >openssl.log 2>&1\n"
      "openssl req -x509 " + key + " -keyout ca.key -out ca.pem -days 2 -subj '/CN=spintune test CA'\n"
      "openssl req -x509 " + key + " -keyout other.key -out other.pem -days 2 -subj '/CN=other CA'\n"
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext\n"
      "openssl req " + key + " -keyout server.key -out server.csr -subj '/CN=localhost'\n"
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
      "-days 2 -extfile san.ext\n"
      "openssl req " + key + " -keyout client.key -out client.csr -subj '/CN=board-a'\n"
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem "
      "-days 2\n"
      "openssl req " + key + " -keyout rogue.key -out rogue.csr -subj '/CN=rogue'\n"
      "openssl x509 -req -in rogue.csr -CA other.pem -CAkey other.key -CAcreateserial "
      "-out rogue.pem -days 2\n";
  if (std::system(("bash -c \"$(cat <<'SPINTUNE_EOF'\n" + script + "SPINTUNE_EOF\n)\"").c_str()) != 0) {
    return false;
  }
  *c = {dir + "/ca.pem",     dir + "/server.pem", dir + "/server.key", dir + "/client.pem",
        dir + "/client.key", dir + "/other.pem",  dir + "/rogue.pem",  dir + "/rogue.key"};
  return true;
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_TEST_CERTS_H_

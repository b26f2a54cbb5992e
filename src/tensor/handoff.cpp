#include "tensor/handoff.h"

#include <mutex>
#include <string>
#include <unordered_map>

#include "lazuli/error.h"

namespace lz::internal {
namespace {

struct Tickets {
  std::mutex mu;
  uint64_t next = 1;
  std::unordered_map<uint64_t, std::vector<Tensor>> held;
};

Tickets& tickets() {
  static Tickets* t = new Tickets();  // never destroyed: tensors may be taken at exit
  return *t;
}

}  // namespace

uint64_t put_tensors(std::vector<Tensor> tensors) {
  Tickets& t = tickets();
  std::lock_guard<std::mutex> lock(t.mu);
  uint64_t ticket = t.next++;
  t.held.emplace(ticket, std::move(tensors));
  return ticket;
}

std::vector<Tensor> take_tensors(uint64_t ticket) {
  std::vector<Tensor> out;
  {
    Tickets& t = tickets();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.held.find(ticket);
    if (it == t.held.end()) {
      throw ValueError("take_tensors: no tensors are held under ticket " + std::to_string(ticket) +
                       " (never issued, or already taken)");
    }
    out = std::move(it->second);
    t.held.erase(it);
  }
  return out;  // destroyed outside the lock if the caller drops them
}

void release_all_tickets() {
  std::unordered_map<uint64_t, std::vector<Tensor>> dropped;
  Tickets& t = tickets();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    dropped.swap(t.held);
  }
}

}  // namespace lz::internal

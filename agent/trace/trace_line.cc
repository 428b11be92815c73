#include "agent/trace/trace_line.h"

namespace spintune {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdent(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_';
}
bool IsSpace(char c) { return c == ' ' || c == '\t'; }

absl::string_view TrimSpaces(absl::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Parses "123.456789" or "1178761359646" ending exactly at `text`'s end.
bool ParseTimestamp(absl::string_view text, uint64_t* ns, bool* integer_clock) {
  if (text.empty() || text.size() > 30) return false;
  uint64_t whole = 0, frac = 0;
  size_t i = 0, frac_digits = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (i >= 19) return false;  // beyond any clock
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0) return false;
  if (i == text.size()) {
    *ns = whole;
    *integer_clock = true;
    return true;
  }
  if (text[i] != '.') return false;
  for (++i; i < text.size() && IsDigit(text[i]); ++i, ++frac_digits) {
    if (frac_digits < 9) frac = frac * 10 + (text[i] - '0');
  }
  if (i != text.size() || frac_digits == 0) return false;
  if (whole > ~uint64_t{0} / 1'000'000'000ull - 1) return false;
  for (size_t d = frac_digits; d < 9; ++d) frac *= 10;
  *ns = whole * 1'000'000'000ull + frac;
  *integer_clock = false;
  return true;
}

// Splits "comm-pid" at the last '-' followed only by digits.
bool SplitTask(absl::string_view s, absl::string_view* task, int* pid) {
  s = TrimSpaces(s);
  const size_t dash = s.rfind('-');
  if (dash == absl::string_view::npos || dash + 1 >= s.size()) return false;
  int value = 0;
  if (s.size() - dash - 1 > 9) return false;  // pids fit in 9 digits (pid_max <= 2^22)
  for (size_t i = dash + 1; i < s.size(); ++i) {
    if (!IsDigit(s[i])) return false;
    value = value * 10 + (s[i] - '0');
  }
  *task = s.substr(0, dash);
  *pid = value;
  return true;
}

}  // namespace

bool ParseNumber(absl::string_view t, uint64_t* value) {
  if (t.empty()) return false;
  uint64_t v = 0;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    for (size_t i = 2; i < t.size(); ++i) {
      const char c = t[i];
      int d;
      if (IsDigit(c)) d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return false;
      if (v >> 60) return false;
      v = v * 16 + static_cast<uint64_t>(d);
    }
  } else {
    for (char c : t) {
      if (!IsDigit(c)) return false;
      const uint64_t d = static_cast<uint64_t>(c - '0');
      if (v > (~uint64_t{0} - d) / 10) return false;
      v = v * 10 + d;
    }
  }
  *value = v;
  return true;
}

bool ParseSigned(absl::string_view t, int64_t* value) {
  const bool negative = !t.empty() && t[0] == '-';
  uint64_t v = 0;
  if (!ParseNumber(negative ? t.substr(1) : t, &v) || v > (uint64_t{1} << 62)) return false;
  *value = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

absl::string_view FindField(absl::string_view payload, absl::string_view key) {
  size_t from = 0;
  while (true) {
    const size_t at = payload.find(key, from);
    if (at == absl::string_view::npos) return {};
    const size_t eq = at + key.size();
    const bool starts = at == 0 || payload[at - 1] == ' ' || payload[at - 1] == ',';
    if (starts && eq < payload.size() && payload[eq] == '=') {
      size_t end = eq + 1;
      while (end < payload.size() && payload[end] != ' ' && payload[end] != ',') ++end;
      return payload.substr(eq + 1, end - eq - 1);
    }
    from = at + 1;
  }
}

LineKind ParseTraceLine(absl::string_view line, TraceRecord* r) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  const absl::string_view trimmed = TrimSpaces(line);
  if (trimmed.empty()) return LineKind::kEmpty;
  if (trimmed[0] == '#' || trimmed.substr(0, 5) == "cpus=" || trimmed.substr(0, 9) == "version =") {
    return LineKind::kComment;
  }
  if (trimmed.substr(0, 4) == "CPU:" && trimmed.find("LOST") != absl::string_view::npos) {
    return LineKind::kLost;
  }
  // The anchor: "<timestamp>: <event>:" with the timestamp preceded by a
  // space (or a "]" of the CPU column in compact outputs).
  size_t pos = 0;
  while (true) {
    const size_t colon = line.find(": ", pos);
    if (colon == absl::string_view::npos) return LineKind::kNotEvent;
    pos = colon + 1;
    size_t ts_begin = colon;
    while (ts_begin > 0 && (IsDigit(line[ts_begin - 1]) || line[ts_begin - 1] == '.')) --ts_begin;
    if (ts_begin == colon || (ts_begin > 0 && !IsSpace(line[ts_begin - 1]) && line[ts_begin - 1] != ']')) {
      continue;
    }
    uint64_t ts = 0;
    bool integer_clock = false;
    if (!ParseTimestamp(line.substr(ts_begin, colon - ts_begin), &ts, &integer_clock)) continue;
    // Event name after the anchor (skipping a trace-cmd --ts-diff "(+N)").
    size_t e = colon + 2;
    while (e < line.size() && IsSpace(line[e])) ++e;
    if (e < line.size() && line[e] == '(') {
      const size_t close = line.find(')', e);
      if (close == absl::string_view::npos) return LineKind::kMalformed;
      e = close + 1;
      while (e < line.size() && IsSpace(line[e])) ++e;
    }
    size_t ee = e;
    while (ee < line.size() && (IsIdent(line[ee]) || line[ee] == ':')) ++ee;
    // The identifier must end with ':' followed by a space or the line end.
    if (ee == e || line[ee - 1] != ':' || (ee < line.size() && !IsSpace(line[ee]))) {
      return LineKind::kNotEvent;  // function tracer "func <-caller", printk text
    }
    absl::string_view event = line.substr(e, ee - e - 1);
    const size_t sub = event.rfind(':');
    if (sub != absl::string_view::npos) event.remove_prefix(sub + 1);  // perf "block:block_rq_issue"
    if (event.empty()) return LineKind::kMalformed;
    r->event = event;
    r->payload = ee < line.size() ? TrimSpaces(line.substr(ee)) : absl::string_view();
    r->ts_ns = ts;
    r->integer_clock = integer_clock;

    // The context before the timestamp.
    absl::string_view ctx = line.substr(0, ts_begin);
    // trace-cmd's "INSTANCE:" prefix (the line does not start with a space).
    if (!ctx.empty() && !IsSpace(ctx[0])) {
      const size_t first_space = ctx.find(' ');
      if (first_space != absl::string_view::npos && first_space > 0 && ctx[first_space - 1] == ':' &&
          ctx.substr(0, first_space).find('-') == absl::string_view::npos) {
        ctx.remove_prefix(first_space + 1);
      }
    }
    ctx = TrimSpaces(ctx);
    r->flags = {};
    r->cpu = -1;
    const size_t open = ctx.rfind('[');
    const size_t close = ctx.rfind(']');
    absl::string_view task_part;
    if (open != absl::string_view::npos && close != absl::string_view::npos && close > open) {
      int cpu = 0;
      bool ok = close > open + 1 && close - open - 1 <= 6;
      for (size_t i = open + 1; i < close && ok; ++i) {
        if (!IsDigit(ctx[i])) ok = false;
        else cpu = cpu * 10 + (ctx[i] - '0');
      }
      if (!ok) return LineKind::kMalformed;
      r->cpu = cpu;
      r->flags = TrimSpaces(ctx.substr(close + 1));
      task_part = TrimSpaces(ctx.substr(0, open));
      // "(  TGID)" or "(-------)" before the CPU column.
      if (!task_part.empty() && task_part.back() == ')') {
        const size_t paren = task_part.rfind('(');
        if (paren == absl::string_view::npos) return LineKind::kMalformed;
        task_part = TrimSpaces(task_part.substr(0, paren));
      }
      // perf script: "COMM PID [CPU]" (space instead of '-').
      if (!SplitTask(task_part, &r->task, &r->pid)) {
        const size_t sp = task_part.rfind(' ');
        uint64_t pid = 0;
        if (sp == absl::string_view::npos || !ParseNumber(task_part.substr(sp + 1), &pid) ||
            pid > 999'999'999) {
          return LineKind::kMalformed;
        }
        r->task = TrimSpaces(task_part.substr(0, sp));
        r->pid = static_cast<int>(pid);
      }
    } else {
      // trace-cmd -l: "COMM-PID   1dN.5." (CPU digits glued to the flags).
      const size_t sp = ctx.rfind(' ');
      if (sp == absl::string_view::npos) return LineKind::kMalformed;
      absl::string_view cpu_flags = ctx.substr(sp + 1);
      size_t d = 0;
      int cpu = 0;
      while (d < cpu_flags.size() && d < 6 && IsDigit(cpu_flags[d])) {
        cpu = cpu * 10 + (cpu_flags[d++] - '0');
      }
      if (d == 0) return LineKind::kMalformed;
      r->cpu = cpu;
      r->flags = cpu_flags.substr(d);
      if (!SplitTask(ctx.substr(0, sp), &r->task, &r->pid)) return LineKind::kMalformed;
    }
    if (r->flags.size() > 6) return LineKind::kMalformed;
    return LineKind::kEvent;
  }
}

}  // namespace spintune

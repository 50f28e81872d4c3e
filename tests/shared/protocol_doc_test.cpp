// PROTOCOL.md's field tables (§3) say what the codec's tables (keel/wire/message_fields.hpp)
// say: the same keys for every message and nested map, each with the same type and the same
// "required". A field added to a table and not to the document, or documented and not in the
// table, fails here, so the document cannot drift from the wire.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/message_fields.hpp"
#include "keel/wire/vocabulary.hpp"

namespace keel::wire {
namespace {

struct DocField {
  std::string type;
  bool required = false;
  bool operator==(const DocField& o) const { return type == o.type && required == o.required; }
};
using FieldTable = std::map<std::string, DocField>;   // key -> its type and whether required
using Tables = std::map<std::string, FieldTable>;     // "step", "step.scaler", ... -> its fields

// ---- The document's tables ------------------------------------------------------------------

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t`");
  const auto last = s.find_last_not_of(" \t`");
  return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  bool escaped = false;
  for (size_t i = 1; i < row.size(); ++i) {   // past the leading '|'
    const char c = row[i];
    if (c == '|' && !escaped) {
      cells.push_back(trim(cell));
      cell.clear();
    } else {
      cell += c;
    }
    escaped = c == '\\';
  }
  return cells;
}

// Section 3's tables, named by the message (its heading's `type`) and, for a nested map, the
// field it is under ("Each `layers` entry", "`scaler` map:").
Tables document_tables(std::istream& in) {
  const std::regex heading(R"(^### 3\.(\d) .*?(?:`(\w+)`)?.*$)");
  const std::regex nested(R"(^(?:Each )?`(\w+)` (?:map|entry).*$)");
  Tables tables;
  std::string section, caption, line;
  std::vector<std::string> columns;
  FieldTable* table = nullptr;
  std::smatch match;
  while (std::getline(in, line)) {
    if (line.rfind("## 4", 0) == 0) break;
    if (std::regex_match(line, match, heading)) {
      section = match[1] == "1" ? "header" : match[2].str();
      caption = section;
      table = nullptr;
      continue;
    }
    if (std::regex_match(line, match, nested)) {
      caption = section + "." + match[1].str();
      table = nullptr;
      continue;
    }
    if (line.rfind("|", 0) != 0 || section.empty()) {   // not a table, or one before §3
      table = nullptr;
      continue;
    }
    const std::vector<std::string> cells = cells_of(line);
    if (!table) {   // the header row
      columns = cells;
      table = &tables[caption];
      continue;
    }
    if (cells.empty() || cells[0].rfind("---", 0) == 0) continue;
    DocField field;
    for (size_t c = 0; c < cells.size() && c < columns.size(); ++c) {
      if (columns[c] == "type") field.type = cells[c];
      if (columns[c] == "required") field.required = cells[c] == "yes";
    }
    (*table)[cells[0]] = field;
  }
  return tables;
}

// ---- The codec's tables ---------------------------------------------------------------------

template <typename T>
std::string type_of(Presence presence) {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, bool>) return "bool";
  else if constexpr (std::is_same_v<U, int32_t>) return "int32";
  else if constexpr (std::is_same_v<U, int64_t>) return "int64";
  else if constexpr (std::is_same_v<U, uint32_t>) return "uint32";
  else if constexpr (std::is_same_v<U, uint64_t>) return "uint64";
  else if constexpr (std::is_same_v<U, double>) return "float64";
  else if constexpr (std::is_same_v<U, float>) return "float32";
  else if constexpr (std::is_same_v<U, std::string>) return "str";
  else if constexpr (std::is_same_v<U, std::vector<float>>) return "bin";
  else if constexpr (is_vector_v<U>) {
    return has_fields_v<typename U::value_type> ? "array<map>" : "array<" + type_of<typename U::value_type>(presence) + ">";
  } else if constexpr (is_optional_v<U>) {
    if constexpr (has_fields_v<typename U::value_type>) return presence == Presence::kAlways ? "nil or map" : "map";
    else return type_of<typename U::value_type>(presence);
  } else {
    static_assert(has_fields_v<U>);
    return "map";
  }
}

template <typename M>
void add_table(Tables& tables, const std::string& name);

struct TableOf {
  Tables& tables;
  std::string name;
  template <typename T>
  void operator()(const Field<T>& f) const {
    tables[name][f.name] = DocField{type_of<T>(f.presence), f.required};
    using U = std::remove_const_t<T>;
    if constexpr (is_vector_v<U> || is_optional_v<U>) {
      if constexpr (has_fields_v<typename U::value_type>) add_table<typename U::value_type>(tables, name + "." + f.name);
    }
  }
};

template <typename M>
void add_table(Tables& tables, const std::string& name) {
  M message{};
  for_each_field(message, TableOf{tables, name});
}

Tables codec_tables() {
  Tables tables;
  tables["header"] = {{"v", {"uint", true}}, {"type", {"str", true}}};   // written by the codec itself
  StepRecord any;
  for_each_header_field(any, TableOf{tables, "header"});
  add_table<RunDescription>(tables, kTopicRun);
  add_table<StepRecord>(tables, kTopicStep);
  add_table<Event>(tables, kTopicEvent);
  add_table<Command>(tables, kTopicCommand);
  add_table<Ack>(tables, kTopicAck);
  return tables;
}

// Every way the document differs from the codec, one line each.
std::vector<std::string> differences(const Tables& codec, const Tables& document) {
  std::vector<std::string> out;
  for (const auto& [table, fields] : codec) {
    const auto doc = document.find(table);
    if (doc == document.end()) {
      out.push_back(table + ": no table in PROTOCOL.md §3");
      continue;
    }
    for (const auto& [key, field] : fields) {
      const auto documented = doc->second.find(key);
      if (documented == doc->second.end()) {
        out.push_back(table + "." + key + ": in the codec's table (" + field.type + "), not in PROTOCOL.md");
      } else if (!(documented->second == field)) {
        out.push_back(table + "." + key + ": PROTOCOL.md says " + documented->second.type +
                      (documented->second.required ? ", required" : "") + "; the codec " + field.type +
                      (field.required ? ", required" : ""));
      }
    }
    for (const auto& [key, field] : doc->second) {
      if (!fields.count(key)) out.push_back(table + "." + key + ": in PROTOCOL.md, not in the codec's table");
    }
  }
  for (const auto& [table, fields] : document) {
    if (!codec.count(table)) out.push_back(table + ": a table in PROTOCOL.md §3 that the codec does not have");
  }
  return out;
}

std::string protocol_md() {
  std::ifstream in(KEEL_PROTOCOL_MD);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "\n  " + line;
  return out;
}

TEST(ProtocolDoc, EveryFieldTableMatchesTheCodecs) {
  const std::string text = protocol_md();
  ASSERT_FALSE(text.empty()) << "cannot read " << KEEL_PROTOCOL_MD;
  std::istringstream in(text);
  const Tables document = document_tables(in);
  const Tables codec = codec_tables();
  EXPECT_EQ(codec.size(), 12u) << "header, 5 messages, 6 nested maps";
  const std::vector<std::string> found = differences(codec, document);
  EXPECT_TRUE(found.empty()) << "PROTOCOL.md §3 and keel/wire/message_fields.hpp differ:" << joined(found);
}

// The check above can fail: a row taken out of the document, or a type changed, is found.
TEST(ProtocolDoc, ARowMissingOrWrongIsFound) {
  std::string text = protocol_md();
  const std::string row = "| `probe_us` | float64 |";
  const auto at = text.find(row);
  ASSERT_NE(at, std::string::npos);
  std::string without = text;
  without.erase(at, text.find('\n', at) - at + 1);
  std::istringstream in(without);
  EXPECT_EQ(differences(codec_tables(), document_tables(in)),
            std::vector<std::string>{"step.probe_us: in the codec's table (float64), not in PROTOCOL.md"});

  std::string retyped = text;
  retyped.replace(at, row.size(), "| `probe_us` | float32 |");
  std::istringstream in2(retyped);
  EXPECT_EQ(differences(codec_tables(), document_tables(in2)),
            std::vector<std::string>{"step.probe_us: PROTOCOL.md says float32; the codec float64"});
}

// The decoder bounds every array by its table's limit (PROTOCOL §8): none may be left unbounded.
struct UnboundedArrays {
  std::vector<std::string>& out;
  std::string name;
  template <typename T>
  void operator()(const Field<T>& f) const {
    using U = std::remove_const_t<T>;
    if constexpr (is_vector_v<U> && !std::is_same_v<U, std::vector<float>>) {
      if (f.max_items == 0) out.push_back(name + "." + f.name);
    }
    if constexpr (is_optional_v<U>) {
      if constexpr (is_vector_v<typename U::value_type>) {
        if (f.max_items == 0) out.push_back(name + "." + f.name);
      }
    }
  }
};

TEST(ProtocolDoc, EveryArrayHasALimit) {
  std::vector<std::string> unbounded;
  RunDescription run;
  StepRecord step;
  LayerInfo layer;
  for_each_field(run, UnboundedArrays{unbounded, "run"});
  for_each_field(step, UnboundedArrays{unbounded, "step"});
  for_each_field(layer, UnboundedArrays{unbounded, "run.layers"});
  EXPECT_TRUE(unbounded.empty()) << joined(unbounded);
}

// The row of PROTOCOL.md that starts with `start` (a table row's first cells).
std::string row_starting(const std::string& text, const std::string& start) {
  const auto at = text.find("\n" + start);
  if (at == std::string::npos) return "";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

// Each name of `names` quoted ("`\"skip\"`") in `row`; the ones missing, one line each.
template <size_t N>
std::vector<std::string> missing_from(const std::string& row, const char* const (&names)[N], bool quoted) {
  std::vector<std::string> missing;
  for (const char* name : names) {
    const std::string written = quoted ? std::string("`\"") + name + "\"`" : std::string("`") + name + "`";
    if (row.find(written) == std::string::npos) missing.push_back(written);
  }
  return missing;
}

// Every event kind, command kind, policy, cause kind and warning signal of keel/wire is documented where a
// client's author looks for it.
TEST(ProtocolDoc, EveryKindAndPolicyIsDocumented) {
  const std::string text = protocol_md();
  const std::string event_kinds = row_starting(text.substr(text.find("### 3.4")), "| `kind` | str | yes |");
  const std::string command_kinds = row_starting(text.substr(text.find("### 3.5")), "| `kind` | str | yes |");
  const std::string policies = row_starting(text, "| `policy` | `policy` = ");
  const std::string causes = row_starting(text.substr(text.find("`cause` map")), "| `kind` | str | yes |");
  const std::string signals = row_starting(text.substr(text.find("`warning` map")), "| `signal` | str | yes |");
  ASSERT_FALSE(event_kinds.empty() || command_kinds.empty() || policies.empty() || causes.empty() || signals.empty());
  EXPECT_TRUE(missing_from(event_kinds, kEventKinds, true).empty()) << "§3.4 kind:" << joined(missing_from(event_kinds, kEventKinds, true));
  EXPECT_TRUE(missing_from(command_kinds, kCommandKinds, true).empty()) << "§3.5 kind:" << joined(missing_from(command_kinds, kCommandKinds, true));
  EXPECT_TRUE(missing_from(policies, kPolicyNames, true).empty()) << "§6 policy:" << joined(missing_from(policies, kPolicyNames, true));
  EXPECT_TRUE(missing_from(causes, kCauseKinds, true).empty()) << "§3.4 cause kind:" << joined(missing_from(causes, kCauseKinds, true));
  EXPECT_TRUE(missing_from(signals, kWarningSignals, true).empty()) << "§3.4 warning signal:" << joined(missing_from(signals, kWarningSignals, true));
}

}  // namespace
}  // namespace keel::wire

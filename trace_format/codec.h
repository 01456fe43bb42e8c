// Maps the value types of events.h to and from their Cap'n Proto form.
// Private to trace_format: the writer and reader are its only users.
#pragma once

#include <capnp/any.h>
#include <kj/exception.h>

#include <string>
#include <string_view>
#include <vector>

#include "trace_format/events.h"
#include "trace_format/trace.capnp.h"
#include "trace_format/trace.h"

namespace gpurr::trace::codec {

namespace schema = gpurr::capnp_schema;

// What a Cap'n Proto exception says went wrong in a message, without the
// library's source text ("expected boundsCheck(...); Message contained
// out-of-bounds struct pointer." gives "out-of-bounds struct pointer").
inline std::string problem(const kj::Exception& e) {
  std::string text = e.getDescription().cStr();
  if (text.rfind("expected ", 0) == 0) {
    if (const size_t cut = text.find("; "); cut != std::string::npos) text = text.substr(cut + 2);
  }
  for (const std::string_view lead : {"Message contains ", "Message contained ", "Message has "}) {
    if (text.rfind(lead, 0) == 0) text = text.substr(lead.size());
  }
  while (!text.empty() && text.back() == '.') text.pop_back();
  return text.empty() ? "its structure is damaged" : "its structure is damaged (" + text + ")";
}

// Throws unless the elements of a struct list hold something. A list of
// empty structs costs no bytes in a message whatever its length, so a file of
// a few hundred bytes could otherwise make a decoder allocate gigabytes. No
// writer makes one: every struct of trace.capnp has fields.
template <typename List>
void requireElementData(List list) {
  if (list.size() == 0) return;
  const capnp::AnyStruct::Reader first(list[0]);
  if (first.getDataSection().size() == 0 && first.getPointerSection().size() == 0) {
    throw TraceError("a list claims " + std::to_string(list.size()) + " empty elements");
  }
}

// Block-local function table: id -> (module, mangled name).
struct FunctionEntry {
  uint32_t module = 0;
  std::string name;
};

// Adds function `f`, declared in a block, to the block's table. Throws
// TraceError when it is not declared in order (its id the table's size).
void declareFunction(schema::FunctionDef::Reader f, std::vector<FunctionEntry>& functions);

void encodeHeader(const Header& in, schema::Header::Builder out);
Header decodeHeader(schema::Header::Reader in);

// `functionId` is the block-local id the writer assigned to the launch's
// function (ignored for other events).
void encodeEvent(const Event& in, uint32_t functionId, schema::Event::Builder out);

// Decodes into `out`, reusing its storage. Throws TraceError on a launch that
// names an undeclared function id. Returns false, with only `out`'s seq,
// timeNs and thread set, for an event of a kind this gpurr does not know (a
// union member added by a newer gpurr: FORMAT.md §9), which callers skip.
bool decodeEvent(schema::Event::Reader in, const std::vector<FunctionEntry>& functions, Event& out);

}  // namespace gpurr::trace::codec

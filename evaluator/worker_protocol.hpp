// Messages between the engine and a GPU worker process over pipes: a JSON header followed by
// binary blobs (cubins, never base64). Framing: u64 json length, json bytes, u32 blob count,
// then per blob u64 length and bytes. All little-endian.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ptxevo::evaluator {

struct Message {
  nlohmann::json header;
  std::vector<std::vector<std::uint8_t>> blobs;
};

// Writes a whole message; false when the peer is gone.
bool write_message(int fd, const Message& m);
// Reads one message; nullopt on end of stream or a malformed frame (`error` says which).
std::optional<Message> read_message(int fd, std::string* error);

}  // namespace ptxevo::evaluator

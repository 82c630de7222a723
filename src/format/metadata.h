// The metadata section: FileDesc <-> FlatBuffer (schema fcb.fbs), and the
// structural checks shared by the writer (which refuses to write a broken
// description) and the loader (which refuses to load one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fcb/status.h"
#include "format/file_desc.h"

namespace fcb::format {

// Serializes `desc` deterministically (same desc -> same bytes). The result is
// a whole FlatBuffer with file identifier "FCBM".
std::vector<uint8_t> EncodeMetadata(const FileDesc& desc);

// Metadata bytes attributable to each context, for `fcb inspect`: context i's
// share is how much the encoding grows when it is added after contexts
// 0..i-1 (a string shared between contexts is charged to the first one that
// uses it). `*rest` gets the encoding without any context (producer, blob
// table, FlatBuffers framing). The shares plus *rest add up exactly to
// EncodeMetadata(desc).size(). Costs one encoding per context.
std::vector<uint64_t> ContextMetadataBytes(const FileDesc& desc, uint64_t* rest);

// Runs the FlatBuffers verifier over `data` (bounded depth and table count),
// then converts it to a FileDesc and runs CheckDescStructure. `meta_offset` is
// the file offset of `data`, used only in messages. Errors are CorruptFile
// without the file name (the caller adds it). Counts past fcb/limits.h are
// refused before decoding; so, with ResourceExhausted, is metadata whose
// decoded form would take more than `max_decoded_bytes` (contexts that share
// their lists decode to one copy each, so that can exceed the file's size
// many times over). `*decoded_bytes`, when given, gets that size.
Result<FileDesc> DecodeMetadata(const uint8_t* data, uint64_t size, uint64_t meta_offset,
                                uint64_t pool_offset, uint64_t pool_size,
                                uint64_t max_decoded_bytes = UINT64_MAX, uint64_t* decoded_bytes = nullptr);

// Structure that the loader can check without knowing the operators: every
// index (tensor, blob) in range, storage kinds known, every blob inside a pool
// of `pool_size` bytes and aligned (64 bytes; 4096 for blobs >= 64 KiB).
// Counts and ranks within fcb/limits.h. Returns "" when fine, else what is
// wrong and where. Shapes, dtypes and step
// semantics are the runtime's to validate.
// `pool_offset` (the pool's file offset) only appears in messages.
// Attachments: at most limits::kMaxAttachments, each naming a blob that
// exists, names valid (CheckAttachmentName), sorted and unique.
std::string CheckDescStructure(const FileDesc& desc, uint64_t pool_offset, uint64_t pool_size);

// "" when `name` is a valid attachment name: 1 to limits::kMaxAttachmentNameBytes
// bytes of printable ASCII, no space and no '=' (so every name can be given as
// --attach NAME=FILE). Otherwise what is wrong with it.
std::string CheckAttachmentName(const std::string& name);

}  // namespace fcb::format

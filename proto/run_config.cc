#include "proto/run_config.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/error_text.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace sketchfuse {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

// The field's value as text format prints it, cut to kQuotedFieldMaxBytes
// (common/error_text.h) with its full length named: a worker may send a
// string of any size, and the diff goes into a status message.
std::string FieldValue(const v1::RunConfig& message, const FieldDescriptor* field, int index) {
  std::string out;
  TextFormat::PrintFieldValueToString(message, field, index, &out);
  if (out.size() <= kQuotedFieldMaxBytes) return out;
  return absl::StrCat(out.substr(0, kQuotedFieldMaxBytes), "... (", out.size(), " bytes)");
}

std::string DescribeRepeated(const v1::RunConfig& message, const FieldDescriptor* field) {
  const int size = message.GetReflection()->FieldSize(message, field);
  std::vector<std::string> shown;
  constexpr int kShown = 8;
  for (int i = 0; i < size && i < kShown; ++i) shown.push_back(FieldValue(message, field, i));
  return absl::StrCat(size, " values [", absl::StrJoin(shown, ", "), size > kShown ? ", ...]" : "]");
}

}  // namespace

uint64_t MessageFingerprint(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string RunFingerprint(const v1::RunConfig& run) { return absl::StrFormat("%016x", MessageFingerprint(run)); }

std::string DiffRunConfigs(const v1::RunConfig& job, const v1::RunConfig& worker) {
  std::vector<std::string> lines;
  const google::protobuf::Descriptor* descriptor = v1::RunConfig::descriptor();
  const Reflection* reflection = v1::RunConfig::GetReflection();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    if (field->is_repeated()) {
      const int a = reflection->FieldSize(job, field), b = reflection->FieldSize(worker, field);
      int first = -1;
      for (int i = 0; i < std::min(a, b) && first < 0; ++i) {
        if (FieldValue(job, field, i) != FieldValue(worker, field, i)) first = i;
      }
      if (first < 0 && a == b) continue;
      std::string line = absl::StrCat(field->name(), ": job has ", DescribeRepeated(job, field),
                                      ", worker has ", DescribeRepeated(worker, field));
      if (first >= 0) {
        absl::StrAppend(&line, " (first difference at [", first, "]: ", FieldValue(job, field, first),
                        " vs ", FieldValue(worker, field, first), ")");
      }
      lines.push_back(std::move(line));
      continue;
    }
    const std::string a = FieldValue(job, field, -1), b = FieldValue(worker, field, -1);
    if (a != b) lines.push_back(absl::StrCat(field->name(), ": job has ", a, ", worker has ", b));
  }
  return absl::StrJoin(lines, "; ");
}

std::string JobFingerprint(const v1::JobConfig& job) {
  v1::JobConfig content = job;
  content.clear_round_deadline_ms();
  content.clear_finished_rounds_kept();
  return absl::StrFormat("%016x", MessageFingerprint(content));
}

std::string DescribeGroups(const v1::JobConfig& job) {
  int fused = 0;
  for (const v1::GroupConfig& group : job.groups()) fused += group.offset() == 0 ? 1 : 0;
  if (fused == job.groups_size()) return absl::StrCat(job.groups_size(), job.groups_size() == 1 ? " group" : " groups");
  return absl::StrCat(job.groups_size(), " partitions of ", fused, fused == 1 ? " fused group" : " fused groups",
                      " (partition_elements ", job.run().partition_elements(), ")");
}

}  // namespace sketchfuse

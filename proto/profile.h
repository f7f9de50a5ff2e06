#pragma once
// The sensitivity profile of method/profile.h as the API's Profile message, both ways: one
// conversion for every edge that states a profile (the scheduler's adapters write it, the CLI
// reads it back). The store's own fields (model_hash, version, job_id, create_time) are the
// caller's to set when writing.
//
// Thread-safe (pure functions).

#include "method/profile.h"
#include "proto/calibration_params.h"
#include "ripplekv/v1/calibration.pb.h"

namespace ripplekv::v1 {

// The profile's model, parameters, data source and domain, tool version, verification block and,
// when `with_layers`, its layers and stability block, into `out` (other fields untouched).
void ProfileToProto(const method::SensitivityProfile& profile, bool with_layers, Profile* out);

// The Profile message as the profile document (lossless for every field `ripplekv calibrate
// --json` prints; created_at from create_time, seconds precision).
method::SensitivityProfile ProfileFromProto(const Profile& profile);

// The model of a profile (or of a registering worker) as the ModelInfo message and back;
// model_hash <-> hash.
void ModelToProto(const method::ProfileModel& model, ModelInfo* out);
method::ProfileModel ModelFromProto(const ModelInfo& model);

}  // namespace ripplekv::v1

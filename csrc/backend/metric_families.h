// The TRITONSERVER_MetricFamily objects of this backend, one per family name for the whole
// process, shared by every stub that makes a family of that name. Triton hands every
// TRITONSERVER_MetricFamily of one name the same Prometheus family underneath but counts the
// users of a series per TRITONSERVER_MetricFamily object: with one object per stub, a stub
// that deletes its metric (an old instance going away in a reload) frees the series another
// stub still updates, and the server crashes. One shared object lets Triton's own count see
// every user, so a series goes only with its last metric.
#pragma once

#include <string>

#include "triton/tritonserver.h"

namespace pybackend {

// Returns the family named `name` (made on first use, else the shared one with one more
// user), or Triton's error text, e.g. when the name exists with another kind. The first
// description stays, as Triton keeps it.
std::string AcquireMetricFamily(TRITONSERVER_MetricKind kind, const std::string& name,
                                const std::string& description, TRITONSERVER_MetricFamily** family);

// One user fewer; the last one deletes the family (after it deleted its metrics). Returns
// Triton's error text of that delete, "" otherwise.
std::string ReleaseMetricFamily(TRITONSERVER_MetricFamily* family);

}  // namespace pybackend

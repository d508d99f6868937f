// A readable summary of a simulation report, for the CLI and for people: totals, roofline, engines, stalls,
// sections, errors.
#ifndef SIM_REPORT_SUMMARY_H_
#define SIM_REPORT_SUMMARY_H_

#include <string>

#include "proto/report.pb.h"

namespace spatial {

std::string FormatReport(const proto::SimReport& r);

}  // namespace spatial

#endif  // SIM_REPORT_SUMMARY_H_

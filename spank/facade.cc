// C++ bodies of the C facade (facade.h): the process-wide state and the C boundary. Every entry
// point catches everything: an exception escaping into slurmstepd would kill the step daemon, so
// each function turns failures into a failure kind and a one-line reason. The work is elsewhere,
// one concern a file: srun_check.cc (what srun checks and hands the nodes), node_prepare.cc (a
// node's part of a step), step.cc (the plan by launch style), job_dir.cc (the per-node files),
// network.cc (names and routes), and the launch library (configuration, SPEC, inputs).
#include "facade.h"

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "job_dir.h"
#include "network.h"
#include "node_prepare.h"
#include "shadow_log.h"
#include "srun_check.h"
#include "step.h"
#include "topoaware/launch/config.h"
#include "topoaware/launch/request.h"
#include "topoaware/launch/shadow.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/topology/error.h"

namespace {

namespace launch = topoaware::launch;
namespace mapper = topoaware::mapper;
namespace spank = topoaware::spank;
namespace topology = topoaware::topology;

struct State {
  std::vector<std::string> args;  // plugstack arguments
  bool parsed = false;
  launch::Config config;
  bool config_ok = false;
  std::string config_error;
  bool fail_closed = false;
  bool shadow = false;     // mode = "shadow", from the configuration or the plugstack line alone
  std::string shadow_log;  // the same for shadow_log
  bool active = false;
  std::string spec;
  std::string digest;  // srun: what it hands the nodes (digest or verdict), or empty
  std::string health;  // srun: the degraded NICs it planned with (health_text), or empty
  std::string doctor;  // a node's warning from its own checks (doctor = "warn"), or empty
  spank::PreparedStep step;
};

State& state() {
  static State s;
  return s;
}

// The configuration is read on first use, not in slurm_spank_init: a job that does not ask for
// topo-aware pays nothing for it (and hears nothing about a broken file).
State& ensure_config() {
  State& s = state();
  if (s.parsed) return s;
  s.parsed = true;
  // The policy is read from the plugstack line on its own first, so a broken file still fails the
  // way the admin asked.
  // So are shadow mode and its log: a shadow period must not start failing steps because the file
  // broke.
  s.fail_closed = false;
  s.shadow = false;
  s.shadow_log.clear();
  for (const auto& a : s.args) {
    if (a == "policy=fail-closed") s.fail_closed = true;
    if (a == "mode=shadow") s.shadow = true;
    if (a.rfind("shadow_log=/", 0) == 0) s.shadow_log = a.substr(11);
  }
  try {
    s.config = launch::parse_plugstack(s.args);
    s.fail_closed = s.config.policy == launch::Policy::kFailClosed;
    s.shadow = s.config.mode == launch::Mode::kShadow;
    s.shadow_log = s.config.shadow_log;
    s.config_ok = true;
  } catch (const std::exception& e) {
    s.config_ok = false;
    s.config_error = e.what();
  } catch (...) {
    s.config_ok = false;
    s.config_error = "unknown failure reading the configuration";
  }
  return s;
}

void copy_err(char* err, size_t errlen, const std::string& message) {
  if (err == nullptr || errlen == 0) return;
  std::snprintf(err, errlen, "%s", message.c_str());
}

// Runs `body`; an exception becomes its failure kind with its message.
template <typename F>
int guarded(char* err, size_t errlen, F&& body) {
  try {
    return body();
  } catch (const launch::RequestError& e) {
    copy_err(err, errlen, e.what());
    return TA_EREQUEST;
  } catch (const spank::NodeLocalError& e) {
    copy_err(err, errlen, e.what());
    return TA_ENODE;
  } catch (const spank::DisagreeError& e) {
    copy_err(err, errlen, e.what());
    return TA_EDISAGREE;
  } catch (const std::exception& e) {
    copy_err(err, errlen, e.what());
    return TA_EFAIL;
  } catch (...) {
    copy_err(err, errlen, "unknown failure");
    return TA_EFAIL;
  }
}

std::string text_or_empty(const char* s) { return s != nullptr ? s : ""; }

}  // namespace

extern "C" {

int ta_configure(int argc, char** argv, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    State& s = state();
    s.args.clear();
    for (int i = 0; i < argc; ++i) s.args.emplace_back(argv[i] != nullptr ? argv[i] : "");
    s.parsed = false;
    return TA_OK;
  });
}

const char* ta_config_error(void) {
  const State& s = ensure_config();
  return s.config_ok ? nullptr : s.config_error.c_str();
}

int ta_fail_closed(void) { return ensure_config().fail_closed ? 1 : 0; }

int ta_set_spec(const char* spec, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    State& s = state();
    std::string text = spec != nullptr ? spec : "";
    if (text.size() >= TA_SPEC_MAX) {
      throw topology::Error(topology::ErrorCode::kLimit, "SPEC",
                            "longer than " + std::to_string(TA_SPEC_MAX - 1) + " characters");
    }
    launch::parse_spec(text);
    s.spec = text;
    s.active = true;
    return TA_OK;
  });
}

int ta_keep_spec(const char* spec) {
  try {
    State& s = state();
    s.spec = spec != nullptr ? spec : "";
    s.active = true;
    return 0;
  } catch (...) {
    return -1;
  }
}

int ta_active(void) { return state().active ? 1 : 0; }
const char* ta_spec(void) { return state().spec.c_str(); }

const char* const* ta_exported_names(void) {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const auto& n : spank::exported_names()) v.push_back(n.c_str());
    v.push_back(nullptr);
    return v;
  }();
  return names.data();
}

}  // extern "C"

namespace {

// srun's check before launch (ta_local_check), for `spec`; `shadow` plans the step also where the
// allocation is not judged. Keeps the digest and health text for the nodes in `s`.
int local_check(State& s, const ta_local* step, const std::string& spec, const spank::LineSink& out,
                bool shadow, spank::SrunVerdict* verdict, char* err, size_t errlen) {
  s.digest.clear();
  s.health.clear();
  spank::SrunStep srun;
  int rc = guarded(err, errlen, [&] {
    srun.job_id = step->job_id;
    srun.step_id = step->step_id;
    srun.hosts = launch::split_lines(step->hosts);
    srun.gres = launch::split_lines(step->gres);
    srun.nnodes = step->nnodes;
    srun.ntasks = step->ntasks;
    srun.mpi_type = text_or_empty(step->mpi_type);
    srun.hostfile = step->hostfile != nullptr && *step->hostfile != '\0' ? step->hostfile : nullptr;
    // What the SPEC asks that cannot be honoured is the user's error whatever the policy; most of
    // it is known before the configuration is read.
    spank::check_request(s.config_ok ? &s.config : nullptr, spec, srun);
    return TA_OK;
  });
  if (rc != TA_OK) return rc;
  // From here on, what srun cannot do it decides for every node (ta_local_digest).
  if (!s.config_ok) {
    copy_err(err, errlen, s.config_error);
    return TA_EFAIL;
  }
  return guarded(err, errlen, [&] {
    *verdict = spank::check_on_srun(s.config, s.args, spec, srun, out, shadow);
    if (verdict->digest.size() >= TA_DIGEST_MAX) {
      throw topology::Error(topology::ErrorCode::kLimit, TA_DIGEST_ENV,
                            std::to_string(verdict->digest.size()) + " bytes, over " +
                                std::to_string(TA_DIGEST_MAX - 1));
    }
    s.digest = verdict->digest;
    s.health = verdict->health;
    return TA_OK;
  });
}

// The shadow line of a step, from what the check found.
launch::ShadowRecord shadow_record(const State& s, const ta_local* step, const std::string& spec,
                                   int rc, const std::string& err,
                                   const spank::SrunVerdict& verdict) {
  launch::ShadowRecord r;
  r.time = spank::utc_now();
  r.job = step->job_id;
  r.step = step->step_id;
  r.user = spank::user_name();
  r.hosts = step->nnodes;
  r.tasks = step->ntasks;
  r.layout = spec;
  r.spread = verdict.spread.empty() ? "-" : verdict.spread;
  r.digest = verdict.inputs.empty() ? "-" : verdict.inputs;
  if (rc == TA_OK) {
    r.verdict = launch::ShadowVerdict::kWouldApply;
    if (verdict.plan_seconds && verdict.block_seconds) {
      r.plan_ms = *verdict.plan_seconds * 1e3;
      r.block_ms = *verdict.block_seconds * 1e3;
      r.saving_pct = launch::saving_percent(*verdict.plan_seconds, *verdict.block_seconds);
    } else {
      r.reason = verdict.no_plan;
    }
  } else {
    // What apply mode would have done: refuse a request no launch can honour, stop a failure
    // under fail-closed, run the step unmodified under fail-open.
    r.verdict = rc == TA_EREQUEST || s.fail_closed ? launch::ShadowVerdict::kWouldRefuse
                                                   : launch::ShadowVerdict::kError;
    r.reason = err;
  }
  return r;
}

}  // namespace

extern "C" {

int ta_local_check(const struct ta_local* step, ta_line_fn out, void* arg, char* err,
                   size_t errlen) {
  State& s = ensure_config();
  spank::SrunVerdict verdict;
  return local_check(
      s, step, s.spec, [&](int level, const std::string& line) { out(arg, level, line.c_str()); },
      false, &verdict, err, errlen);
}

int ta_shadow_for(const char* spec) {
  try {
    return ensure_config().shadow || (spec != nullptr && mapper::asks_shadow(spec)) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

void ta_local_shadow(const struct ta_local* step, const char* failure, ta_line_fn out, void* arg) {
  State& s = ensure_config();
  try {
    // Every line the check says goes to srun -v only: a shadow step's output is the job's own.
    const spank::LineSink quiet = [&](int, const std::string& line) { out(arg, 1, line.c_str()); };
    const std::string spec = mapper::without_shadow(s.spec);
    spank::SrunVerdict verdict;
    char err[1024] = "";
    int rc = TA_EFAIL;
    if (failure != nullptr) {
      copy_err(err, sizeof err, failure);
    } else {
      rc = local_check(s, step, spec, quiet, true, &verdict, err, sizeof err);
    }
    const std::string line =
        launch::format_shadow_line(shadow_record(s, step, spec, rc, err, verdict));
    out(arg, 1, line.c_str());
    if (!s.shadow_log.empty()) {
      const std::string why = spank::append_line(s.shadow_log, line);
      if (!why.empty()) out(arg, 1, ("topo-aware: shadow_log " + why).c_str());
    }
  } catch (const std::exception& e) {
    out(arg, 1, (std::string("topo-aware: shadow: ") + e.what()).c_str());
  } catch (...) {
  }
  // The nodes get the verdict that the step runs unmodified, whatever the check found.
  s.digest.clear();
  s.health.clear();
}

int ta_unmodified_verdict(const char* digest) {
  try {
    return digest != nullptr && digest == spank::unmodified_digest() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

const char* ta_local_digest(void) {
  State& s = state();
  try {
    if (s.digest.empty()) s.digest = spank::unmodified_digest();
  } catch (...) {
  }
  return s.digest.c_str();
}

const char* ta_local_health(void) {
  const State& s = state();
  return s.health.empty() ? nullptr : s.health.c_str();
}

int ta_step_prepare(const struct ta_step* step, char* err, size_t errlen) {
  State& s = ensure_config();
  s.step = spank::PreparedStep{};
  if (!s.config_ok) {
    const std::string digest = text_or_empty(step->digest);
    copy_err(err, errlen, s.config_error);
    if (digest == spank::unmodified_digest()) return TA_UNMODIFIED;
    // srun read its configuration: this node, reading another (or none), must not launch alone.
    if (!digest.empty()) {
      copy_err(err, errlen, "srun read its inputs, this node cannot: " + s.config_error);
      return TA_EDISAGREE;
    }
    return TA_EFAIL;
  }
  const int rc = guarded(err, errlen, [&] {
    return spank::prepare_on_node(s.config, s.args, s.spec, *step, &s.step) ? TA_OK : TA_UNMODIFIED;
  });
  // Only a job directory this node cannot write leaves a plan standing (without its XML).
  if (rc != TA_OK && rc != TA_ENODE) s.step = spank::PreparedStep{};
  return rc;
}

const char* ta_step_master_host(void) {
  const State& s = state();
  return s.step.ready && !s.step.master_host.empty() ? s.step.master_host.c_str() : nullptr;
}

const char* ta_step_unresolved_master(void) {
  try {
    const char* master = ta_step_master_host();
    return master != nullptr && !spank::resolves(master) ? master : nullptr;
  } catch (...) {
    return nullptr;
  }
}

void ta_step_set_master(const char* addr) {
  try {
    State& s = state();
    if (!s.step.ready) return;
    if (addr != nullptr && *addr != '\0') s.step.plan.env.master_addr = addr;
    char self[256] = "";
    if (::gethostname(self, sizeof self - 1) != 0 || spank::resolves(self)) return;
    const std::string& master =
        s.step.plan.env.master_addr.empty() ? s.step.master_host : s.step.plan.env.master_addr;
    s.step.plan.gloo_ifname = spank::interface_towards(master);
  } catch (...) {
  }
}

const char* ta_step_doctor(const char* host) {
  State& s = ensure_config();
  try {
    s.doctor = s.config_ok ? spank::doctor_line(s.config, text_or_empty(host)) : std::string();
  } catch (const std::exception& e) {
    s.doctor = std::string("the node doctor could not run: ") + e.what();
  } catch (...) {
    s.doctor.clear();
  }
  return s.doctor.empty() ? nullptr : s.doctor.c_str();
}

int ta_step_ready(void) { return state().step.ready ? 1 : 0; }

const char* ta_step_note(void) {
  const State& s = state();
  return s.step.plan.note.empty() ? nullptr : s.step.plan.note.c_str();
}

int ta_task_env(uint32_t global_task, const char* slurm_cvd, ta_env_fn set, void* arg, char* err,
                size_t errlen) {
  return guarded(err, errlen, [&] {
    const State& s = state();
    if (!s.step.ready) throw std::runtime_error("no plan for this step");
    const mapper::Environment env =
        spank::task_env(s.step.plan, global_task, text_or_empty(slurm_cvd));
    for (const auto& [name, value] : env) {
      if (!s.config.overwrite_user_env && s.step.user_env.count(name) != 0) continue;
      if (set(arg, name.c_str(), value.c_str()) != 0) {
        throw std::runtime_error("cannot set " + name);
      }
    }
    return TA_OK;
  });
}

int ta_task_bind(uint32_t global_task, int slurm_bound, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    const State& s = state();
    if (!s.config.bind_cpus || slurm_bound != 0 || !s.step.ready) return 1;
    return spank::bind_to_cpus(spank::task_cpus(s.step.plan, global_task)) ? TA_OK : 1;
  });
}

int ta_prepare_job_dir_base(void) {
  try {
    const State& s = ensure_config();
    return s.config_ok ? spank::make_job_dir_base(s.config.job_dir) : -1;
  } catch (...) {
    return -1;
  }
}

void ta_step_finish(void) {
  try {
    State& s = state();
    if (!s.step.hosts_name.empty()) spank::remove_job_file(s.step.dir_path, s.step.hosts_name);
    spank::remove_job_file(s.step.dir_path, s.step.file_name);
    s.step = spank::PreparedStep{};
  } catch (...) {
  }
}

}  // extern "C"

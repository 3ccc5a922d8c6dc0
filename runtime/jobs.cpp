#include "runtime/jobs.h"

#include <cstdio>

#include "runtime/json_lite.h"

namespace mplan::rt {
namespace {

// The math of a job or result file (runtime/device.h set_math_mode): fp32,
// tf32, or a 16-bit model's bf16 or fp16.
bool known_math(const std::string& math) {
  return math == "fp32" || math == "tf32" || math == "bf16" || math == "fp16";
}

// No slot above 64 GiB: a job file asking for more is not one mplan wrote.
constexpr int64_t kMaxSlotBytes = int64_t{64} << 30;

std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string ints(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string arg_json(const Arg& a) {
  switch (a.kind) {
    case ArgKind::tensor: return "{\"slot\": " + std::to_string(a.slot) + ", \"offset\": " + std::to_string(a.offset_elements) + "}";
    case ArgKind::null_pointer: return "{\"null\": true}";
    case ArgKind::integer: return "{\"int\": " + std::to_string(a.integer) + "}";
    case ArgKind::real: return "{\"real\": " + number(a.real) + "}";
    case ArgKind::flag: return std::string("{\"flag\": ") + (a.flag ? "true" : "false") + "}";
    case ArgKind::conv_shape: {
      const ConvShape& s = a.conv;
      // Dilation (two more numbers) only where it is not 1: older job files stay valid.
      std::vector<int64_t> fields{s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups};
      if (s.dilation_h != 1 || s.dilation_w != 1) fields.insert(fields.end(), {s.dilation_h, s.dilation_w});
      return "{\"conv\": " + ints(fields) + "}";
    }
    case ArgKind::pool_shape: {
      const PoolShape& s = a.pool;
      return "{\"pool\": " +
             ints({s.n, s.c, s.h, s.w, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.ceil_mode ? 1 : 0}) + "}";
    }
    case ArgKind::micro_batches: {
      std::string text = "{\"micro\": [";
      for (size_t i = 0; i < a.micro.size(); ++i)
        text += (i ? ", " : "") + ints({a.micro[i].n, a.micro[i].algo});
      return text + "]}";
    }
    case ArgKind::variable: return std::string("{\"var\": \"") + variable_name(a.variable) + "\"}";
  }
  return "{}";
}

bool fail(std::string* error, const std::string& what) {
  if (error) *error = what;
  return false;
}

bool read_ints(const json::Value* v, size_t count, std::vector<int64_t>* out) {
  if (v == nullptr || v->type != json::Value::Type::array || v->array.size() != count) return false;
  out->clear();
  for (const json::Value& item : v->array) {
    int64_t x;
    if (!item.as_int(&x)) return false;
    out->push_back(x);
  }
  return true;
}

bool read_arg(const json::Value& v, Arg* a, const std::string& where, std::string* error) {
  if (v.type != json::Value::Type::object || v.object.size() != (v.find("slot") ? 2u : 1u))
    return fail(error, where + ": expected one argument object");
  std::vector<int64_t> n;
  if (const json::Value* slot = v.find("slot")) {
    int64_t s, offset;
    if (!slot->as_int(&s) || !v.find("offset") || !v.find("offset")->as_int(&offset) || s < 0 || s > 1 << 20 || offset < 0)
      return fail(error, where + ": a tensor needs a slot and an offset >= 0");
    *a = Arg::tensor(static_cast<int32_t>(s), offset);
  } else if (v.find("null")) {
    *a = Arg::null();
  } else if (const json::Value* i = v.find("int")) {
    int64_t x;
    if (!i->as_int(&x)) return fail(error, where + ": \"int\" must be an integer");
    *a = Arg::of(x);
  } else if (const json::Value* r = v.find("real")) {
    double x;
    if (!r->as_double(&x)) return fail(error, where + ": \"real\" must be a finite number");
    *a = Arg::of_real(x);
  } else if (const json::Value* f = v.find("flag")) {
    if (f->type != json::Value::Type::boolean) return fail(error, where + ": \"flag\" must be true or false");
    *a = Arg::of_flag(f->boolean);
  } else if (read_ints(v.find("conv"), 12, &n) || read_ints(v.find("conv"), 14, &n)) {
    ConvShape shape{n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10], n[11]};
    if (n.size() == 14) {
      shape.dilation_h = n[12];
      shape.dilation_w = n[13];
    }
    *a = Arg::of(shape);
  } else if (read_ints(v.find("pool"), 11, &n)) {
    *a = Arg::of(PoolShape{n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10] != 0});
  } else if (const json::Value* m = v.find("micro")) {
    if (m->type != json::Value::Type::array || m->array.empty() || m->array.size() > 4096)
      return fail(error, where + ": \"micro\" must be a list of [n, algorithm]");
    std::vector<ConvMicroBatch> micro;
    for (const json::Value& item : m->array) {
      if (!read_ints(&item, 2, &n)) return fail(error, where + ": \"micro\" must be a list of [n, algorithm]");
      micro.push_back(ConvMicroBatch{n[0], static_cast<ConvAlgoId>(n[1])});
    }
    *a = Arg::of(std::move(micro));
  } else if (const json::Value* var = v.find("var")) {
    bool found = false;
    for (Variable x : {Variable::seed, Variable::step, Variable::lr, Variable::first_update, Variable::first_sample})
      if (var->type == json::Value::Type::string && var->text == variable_name(x)) {
        *a = Arg::of(x);
        found = true;
      }
    if (!found) return fail(error, where + ": unknown variable");
  } else {
    return fail(error, where + ": not an argument (slot, null, int, real, flag, conv, pool, micro or var)");
  }
  return true;
}

bool read_call(const json::Value& v, KernelCall* call, int32_t slots, const std::string& where, std::string* error) {
  const json::Value* kernel = v.find("kernel");
  const json::Value* args = v.find("args");
  if (kernel == nullptr || kernel->type != json::Value::Type::string || !kernel_from_name(kernel->text, &call->kernel))
    return fail(error, where + ": \"kernel\" must name a kernel of runtime/kernels.def");
  if (args == nullptr || args->type != json::Value::Type::array) return fail(error, where + ": needs \"args\"");
  call->args.clear();
  for (size_t i = 0; i < args->array.size(); ++i) {
    Arg a;
    if (!read_arg(args->array[i], &a, where + ".args[" + std::to_string(i) + "]", error)) return false;
    call->args.push_back(std::move(a));
  }
  const std::string why = check_kernel_call(*call, slots);
  return why.empty() || fail(error, where + ": " + why);
}

bool read_int_field(const json::Value& v, const char* key, int64_t low, int64_t high, int64_t* out,
                    const std::string& where, std::string* error) {
  const json::Value* field = v.find(key);
  if (field == nullptr || !field->as_int(out) || *out < low || *out > high)
    return fail(error, where + ": \"" + key + "\" must be an integer in [" + std::to_string(low) + ", " +
                           std::to_string(high) + "]");
  return true;
}

}  // namespace

std::string jobs_to_json(const JobFile& jobs) {
  std::string text = "{\n \"format\": \"mplan-jobs\",\n \"version\": " + std::to_string(kJobFormatVersion) +
                     ",\n \"model\": " + json::quote(jobs.model) + ",\n \"math\": " + json::quote(jobs.math) +
                     ",\n \"warmup\": " + std::to_string(jobs.warmup) +
                     ",\n \"repeats\": " + std::to_string(jobs.repeats) + ",\n \"copy_sizes\": " + ints(jobs.copy_sizes) +
                     ",\n \"jobs\": [";
  for (size_t j = 0; j < jobs.jobs.size(); ++j) {
    const Job& job = jobs.jobs[j];
    text += std::string(j ? "," : "") + "\n  {\"key\": " + json::quote(job.key) + ",\n   \"slot_bytes\": " +
            ints(job.slot_bytes) + ",\n   \"slot_roles\": [";
    for (size_t i = 0; i < job.slot_roles.size(); ++i) text += (i ? ", " : "") + json::quote(job.slot_roles[i]);
    text += "],\n   \"calls\": [";
    for (size_t c = 0; c < job.calls.size(); ++c) {
      text += std::string(c ? ",\n     " : "") + "{\"kernel\": \"" + kernel_name(job.calls[c].kernel) + "\", \"args\": [";
      for (size_t i = 0; i < job.calls[c].args.size(); ++i) text += (i ? ", " : "") + arg_json(job.calls[c].args[i]);
      text += "]}";
    }
    text += "]}";
  }
  return text + "\n ]\n}\n";
}

bool parse_jobs(const std::string& text, JobFile* jobs, std::string* error) {
  json::Value root;
  std::string why;
  if (!json::parse(text, &root, &why)) return fail(error, why);
  const json::Value* format = root.find("format");
  if (format == nullptr || format->text != "mplan-jobs") return fail(error, "not an mplan job file (\"format\": \"mplan-jobs\")");
  int64_t version, warmup, repeats;
  if (!read_int_field(root, "version", kJobFormatVersion, kJobFormatVersion, &version, "the file", error) ||
      !read_int_field(root, "warmup", 0, 1000, &warmup, "the file", error) ||
      !read_int_field(root, "repeats", 1, 10000, &repeats, "the file", error))
    return false;
  *jobs = JobFile{};
  jobs->warmup = static_cast<int32_t>(warmup);
  jobs->repeats = static_cast<int32_t>(repeats);
  if (const json::Value* model = root.find("model"); model != nullptr && model->type == json::Value::Type::string)
    jobs->model = model->text;
  if (const json::Value* math = root.find("math")) {  // optional: files from before the field are fp32
    if (math->type != json::Value::Type::string || !known_math(math->text))
      return fail(error, "\"math\" must be \"fp32\", \"tf32\", \"bf16\" or \"fp16\"");
    jobs->math = math->text;
  }
  if (const json::Value* sizes = root.find("copy_sizes")) {
    if (sizes->type != json::Value::Type::array) return fail(error, "\"copy_sizes\" must be a list of byte counts");
    for (const json::Value& s : sizes->array) {
      int64_t bytes;
      if (!s.as_int(&bytes) || bytes < 1 || bytes > kMaxSlotBytes)
        return fail(error, "\"copy_sizes\": every size must be in [1, 64 GiB]");
      jobs->copy_sizes.push_back(bytes);
    }
  }
  const json::Value* list = root.find("jobs");
  if (list == nullptr || list->type != json::Value::Type::array) return fail(error, "needs a \"jobs\" list");
  for (size_t j = 0; j < list->array.size(); ++j) {
    const json::Value& v = list->array[j];
    const std::string where = "jobs[" + std::to_string(j) + "]";
    Job job;
    const json::Value* key = v.find("key");
    if (key == nullptr || key->type != json::Value::Type::string) return fail(error, where + ": needs a \"key\"");
    job.key = key->text;
    const json::Value* slots = v.find("slot_bytes");
    const json::Value* roles = v.find("slot_roles");
    if (slots == nullptr || slots->type != json::Value::Type::array || roles == nullptr ||
        roles->type != json::Value::Type::array || roles->array.size() != slots->array.size())
      return fail(error, where + ": needs \"slot_bytes\" and \"slot_roles\" of one length");
    for (size_t i = 0; i < slots->array.size(); ++i) {
      int64_t bytes;
      if (!slots->array[i].as_int(&bytes) || bytes < 0 || bytes > kMaxSlotBytes)
        return fail(error, where + ".slot_bytes[" + std::to_string(i) + "]: must be in [0, 64 GiB]");
      job.slot_bytes.push_back(bytes);
      job.slot_roles.push_back(roles->array[i].text);
    }
    const json::Value* calls = v.find("calls");
    // An empty list is a task that runs no kernel (an add's or a concat's BP1
    // passes the gradient through by aliasing): it costs nothing.
    if (calls == nullptr || calls->type != json::Value::Type::array)
      return fail(error, where + ": needs a \"calls\" list");
    for (size_t c = 0; c < calls->array.size(); ++c) {
      KernelCall call;
      if (!read_call(calls->array[c], &call, static_cast<int32_t>(job.slot_bytes.size()),
                     where + ".calls[" + std::to_string(c) + "]", error))
        return false;
      job.calls.push_back(std::move(call));
    }
    jobs->jobs.push_back(std::move(job));
  }
  return true;
}

std::string results_to_json(const ResultFile& r) {
  const BackendInfo& b = r.backend;
  std::string text = "{\n \"format\": \"mplan-kernel-times\",\n \"version\": " + std::to_string(kJobFormatVersion) +
                     ",\n \"backend\": {\"name\": " + json::quote(b.backend) + ", \"device\": " + json::quote(b.device) +
                     ", \"driver\": " + json::quote(b.driver) + ", \"runtime\": " + json::quote(b.runtime) +
                     ", \"libraries\": " + json::quote(b.libraries) + ", \"memory_bytes\": " +
                     std::to_string(b.memory_bytes) + "},\n \"math\": " + json::quote(r.math) + ",\n \"repeats\": " + std::to_string(r.repeats) +
                     ",\n \"copies\": [";
  for (size_t i = 0; i < r.copies.size(); ++i)
    text += std::string(i ? "," : "") + "\n  {\"bytes\": " + std::to_string(r.copies[i].bytes) +
            ", \"host_to_device_ms\": " + number(r.copies[i].host_to_device_ms) + ", \"device_to_host_ms\": " +
            number(r.copies[i].device_to_host_ms) +
            (r.copies[i].both_directions_ms > 0
                 ? ", \"both_directions_ms\": " + number(r.copies[i].both_directions_ms)
                 : std::string()) +
            "}";
  text += "\n ],\n \"results\": [";
  for (size_t j = 0; j < r.results.size(); ++j) {
    const JobResult& result = r.results[j];
    text += std::string(j ? "," : "") + "\n  {\"key\": " + json::quote(result.key);
    if (!result.error.empty()) text += ", \"error\": " + json::quote(result.error);
    text += ", \"options\": [";
    for (size_t i = 0; i < result.options.size(); ++i)
      text += std::string(i ? ", " : "") + "{\"algorithm\": " + json::quote(result.options[i].algorithm) +
              ", \"time_ms\": " + number(result.options[i].time_ms) + ", \"workspace_bytes\": " +
              std::to_string(result.options[i].workspace_bytes) + "}";
    text += "]}";
  }
  return text + "\n ]\n}\n";
}

bool parse_results(const std::string& text, ResultFile* results, std::string* error) {
  json::Value root;
  std::string why;
  if (!json::parse(text, &root, &why)) return fail(error, why);
  const json::Value* format = root.find("format");
  if (format == nullptr || format->text != "mplan-kernel-times")
    return fail(error, "not a kernel profiler result file (\"format\": \"mplan-kernel-times\")");
  *results = ResultFile{};
  const json::Value* backend = root.find("backend");
  if (backend == nullptr || backend->type != json::Value::Type::object) return fail(error, "needs \"backend\"");
  auto text_of = [&](const char* key) {
    const json::Value* v = backend->find(key);
    return v != nullptr && v->type == json::Value::Type::string ? v->text : std::string();
  };
  results->backend.backend = text_of("name");
  results->backend.device = text_of("device");
  results->backend.driver = text_of("driver");
  results->backend.runtime = text_of("runtime");
  results->backend.libraries = text_of("libraries");
  if (!read_int_field(*backend, "memory_bytes", 0, int64_t{1} << 50, &results->backend.memory_bytes, "backend", error))
    return false;
  if (results->backend.backend != "cpu" && results->backend.backend != "cuda")
    return fail(error, "backend.name must be \"cpu\" or \"cuda\"");
  if (const json::Value* math = root.find("math")) {  // optional: files from before the field are fp32
    if (math->type != json::Value::Type::string || !known_math(math->text))
      return fail(error, "\"math\" must be \"fp32\", \"tf32\", \"bf16\" or \"fp16\"");
    results->math = math->text;
  }
  int64_t repeats = 0;
  if (!read_int_field(root, "repeats", 1, 10000, &repeats, "the file", error)) return false;
  results->repeats = static_cast<int32_t>(repeats);
  if (const json::Value* copies = root.find("copies"); copies != nullptr && copies->type == json::Value::Type::array) {
    for (size_t i = 0; i < copies->array.size(); ++i) {
      const json::Value& c = copies->array[i];
      CopyTiming t;
      const std::string where = "copies[" + std::to_string(i) + "]";
      if (!read_int_field(c, "bytes", 1, kMaxSlotBytes, &t.bytes, where, error)) return false;
      const json::Value* h2d = c.find("host_to_device_ms");
      const json::Value* d2h = c.find("device_to_host_ms");
      if (h2d == nullptr || d2h == nullptr || !h2d->as_double(&t.host_to_device_ms) ||
          !d2h->as_double(&t.device_to_host_ms) || t.host_to_device_ms <= 0 || t.device_to_host_ms <= 0)
        return fail(error, where + ": needs positive host_to_device_ms and device_to_host_ms");
      if (const json::Value* both = c.find("both_directions_ms");
          both != nullptr && (!both->as_double(&t.both_directions_ms) || !(t.both_directions_ms > 0)))
        return fail(error, where + ": both_directions_ms must be a positive number where it is given");
      results->copies.push_back(t);
    }
  }
  const json::Value* list = root.find("results");
  if (list == nullptr || list->type != json::Value::Type::array) return fail(error, "needs a \"results\" list");
  for (size_t j = 0; j < list->array.size(); ++j) {
    const json::Value& v = list->array[j];
    const std::string where = "results[" + std::to_string(j) + "]";
    JobResult result;
    const json::Value* key = v.find("key");
    if (key == nullptr || key->type != json::Value::Type::string) return fail(error, where + ": needs a \"key\"");
    result.key = key->text;
    if (const json::Value* e = v.find("error"); e != nullptr && e->type == json::Value::Type::string) result.error = e->text;
    const json::Value* options = v.find("options");
    if (options == nullptr || options->type != json::Value::Type::array) return fail(error, where + ": needs \"options\"");
    for (size_t i = 0; i < options->array.size(); ++i) {
      const json::Value& o = options->array[i];
      const std::string at = where + ".options[" + std::to_string(i) + "]";
      JobOption option;
      const json::Value* algorithm = o.find("algorithm");
      const json::Value* time = o.find("time_ms");
      if (algorithm == nullptr || algorithm->type != json::Value::Type::string || time == nullptr ||
          !time->as_double(&option.time_ms) || option.time_ms < 0)
        return fail(error, at + ": needs an algorithm and a time_ms >= 0");
      option.algorithm = algorithm->text;
      if (!read_int_field(o, "workspace_bytes", 0, kMaxSlotBytes, &option.workspace_bytes, at, error)) return false;
      result.options.push_back(option);
    }
    results->results.push_back(std::move(result));
  }
  return true;
}

bool conv_call_arguments(const KernelCall& call, int* algorithm, int* workspace, int* workspace_bytes) {
  ConvDirection direction;
  if (!kernel_conv_direction(call.kernel, &direction)) return false;
  const std::vector<ParamType>& params = kernel_params(call.kernel);
  *algorithm = *workspace = *workspace_bytes = -1;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] == ParamType::algorithm) *algorithm = static_cast<int>(i);
    if (params[i] == ParamType::bytes && i + 1 < params.size() && params[i + 1] == ParamType::i64) {
      *workspace = static_cast<int>(i);
      *workspace_bytes = static_cast<int>(i + 1);
    }
  }
  return *algorithm >= 0 && *workspace >= 0;
}

}  // namespace mplan::rt

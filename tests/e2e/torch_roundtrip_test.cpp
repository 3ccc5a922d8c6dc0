// The weights back in PyTorch (tools/mplan_export.py --from-checkpoint): a
// module exported with its weights, trained two steps by the generated
// program, and loaded back into the module computes, in PyTorch, the loss the
// program computes with the same weights on the same batch.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "runtime/npy.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

double loss_of_step(const std::string& output, int step) {
  const std::string key = "step " + std::to_string(step) + ": loss ";
  const size_t at = output.find(key);
  return at == std::string::npos ? NAN : std::stod(output.substr(at + key.size()));
}

TEST(TorchRoundTrip, TrainedWeightsLoadBackIntoTheModuleAndComputeTheProgramsLoss) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch, numpy and yaml";
  const std::string dir = work_dir("torch-roundtrip");
  const std::string exporter = "/usr/bin/python3 " + source_dir() + "/tools/mplan_export.py ";
  const std::string net = source_dir() + "/tests/e2e/roundtrip_net.py";
  const std::string shape = " " + net + ":make_net --input 3,16,16 --batch 8";
  RunResult exported = run_command(exporter + shape + " -o " + dir + "/net.yaml --weights " + dir + "/w");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  Compiled compiled = compile_model(dir + "/net.yaml", Budget::unlimited, "torch-roundtrip-build");
  ASSERT_EQ(compiled.error, "");
  ASSERT_EQ(build_program(compiled.dir), "");
  RunResult data = run_command("/usr/bin/python3 " + source_dir() + "/tests/e2e/torch_train.py data --model " + dir +
                               "/net.yaml --samples 24 --seed 3 --out " + dir + "/data");
  ASSERT_EQ(data.exit_code, 0) << data.output;
  RunResult trained =
      run_program(compiled.dir, "--steps 2 --load " + dir + "/w --data " + dir + "/data --save " + dir + "/ckpt");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  RunResult back = run_command(exporter + shape + " --from-checkpoint " + dir + "/ckpt -o " + dir + "/trained.pt");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  // Every tensor of the checkpoint is in the state dict, running statistics included.
  RunResult same = run_command(
      "/usr/bin/python3 -c \"import torch, numpy as np, json, os, sys; s=torch.load('" + dir +
      "/trained.pt'); d=os.path.realpath('" + dir + "/ckpt/latest'); n=0\n"
      "for f in os.listdir(d):\n"
      "  if not f.endswith('.npy') or '.momentum' in f: continue\n"
      "  a=np.load(os.path.join(d, f)); k=f[:-4]; n+=1\n"
      "  m=[v for key, v in s.items() if key.endswith(k.split('.',1)[1]) and v.numel()==a.size]\n"
      "  assert any(np.array_equal(v.numpy().reshape(-1), a.reshape(-1)) for v in m), f\n"
      "print(n, 'tensors equal')\"");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("tensors equal"), std::string::npos) << same.output;
  // Step 3 reads samples 16 .. 23 with the weights after two updates.
  RunResult step3 = run_program(compiled.dir, "--steps 1 --load " + dir + "/ckpt --data " + dir + "/data");
  ASSERT_EQ(step3.exit_code, 0) << step3.output;
  RunResult torch = run_command("/usr/bin/python3 " + net + " " + dir + "/trained.pt " + dir + "/data 16 8");
  ASSERT_EQ(torch.exit_code, 0) << torch.output;
  const double program_loss = loss_of_step(step3.output, 3), torch_loss = std::stod(torch.output);
  std::printf("step 3 loss: program %.9g, PyTorch %.9g\n", program_loss, torch_loss);
  EXPECT_NEAR(program_loss, torch_loss, 1e-5 * std::fabs(torch_loss));
  // The trained weights differ from the exported ones, so the check means something.
  RunResult initial = run_command(exporter + shape + " --from-checkpoint " + dir + "/w -o " + dir + "/initial.pt");
  ASSERT_EQ(initial.exit_code, 0) << initial.output;
  RunResult torch_initial = run_command("/usr/bin/python3 " + net + " " + dir + "/initial.pt " + dir + "/data 16 8");
  ASSERT_EQ(torch_initial.exit_code, 0) << torch_initial.output;
  EXPECT_GT(std::fabs(std::stod(torch_initial.output) - torch_loss), 1e-4);

  // The program's evaluation (`--eval`: the forward-only plan, batch norm with
  // its running statistics) of the trained weights on all 24 samples (three
  // batches) equals PyTorch's forward pass in eval() mode.
  const std::string log = dir + "/eval.jsonl";
  RunResult evaluated =
      run_program(compiled.dir, "--eval --load " + dir + "/ckpt --val " + dir + "/data --log " + log);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  EXPECT_NE(evaluated.output.find("(24 samples after step 2"), std::string::npos) << evaluated.output;
  RunResult torch_eval = run_command("/usr/bin/python3 " + net + " " + dir + "/trained.pt " + dir + "/data 0 24 eval");
  ASSERT_EQ(torch_eval.exit_code, 0) << torch_eval.output;
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  const std::smatch m = [&] {
    std::smatch found;
    std::regex_search(line, found, std::regex(R"("val_loss": ([0-9.eE+-]+), "val_top1": ([0-9.eE+-]+))"));
    return found;
  }();
  ASSERT_EQ(m.size(), 3u) << line;
  const double eval_loss = std::stod(torch_eval.output);
  const double eval_top1 = std::stod(torch_eval.output.substr(torch_eval.output.find("top1 ") + 5));
  std::printf("evaluation: program loss %s top1 %s, PyTorch eval() loss %.9g top1 %.9g\n", m[1].str().c_str(),
              m[2].str().c_str(), eval_loss, eval_top1);
  EXPECT_NEAR(std::stod(m[1]), eval_loss, 1e-5 * std::fabs(eval_loss));
  EXPECT_NEAR(std::stod(m[2]), eval_top1, 1e-6);  // the same hits of 24
  // Running statistics differ from the batch's: eval() is not the training-mode loss.
  RunResult torch_train_mode = run_command("/usr/bin/python3 " + net + " " + dir + "/trained.pt " + dir + "/data 0 24");
  ASSERT_EQ(torch_train_mode.exit_code, 0) << torch_train_mode.output;
  EXPECT_GT(std::fabs(std::stod(torch_train_mode.output) - eval_loss), 1e-4);
}

TEST(TorchRoundTrip, ACheckpointOfAnotherModelIsRefusedByName) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch, numpy and yaml";
  const std::string dir = work_dir("torch-roundtrip-other");
  std::filesystem::create_directories(dir + "/empty");
  RunResult r = run_command("/usr/bin/python3 " + source_dir() + "/tools/mplan_export.py " + source_dir() +
                            "/tests/e2e/roundtrip_net.py:make_net --input 3,16,16 --batch 8 --from-checkpoint " + dir +
                            "/empty -o " + dir + "/x.pt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/empty/n0.bias.npy: missing (the checkpoint of another model?)"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.pt"));
}

}  // namespace
}  // namespace mplan::e2e

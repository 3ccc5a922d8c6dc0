#pragma once
// The generated program's training data (`train --data DIR`) and the order
// its steps read it in (docs/generated-program.md, "Data").
//
// DIR/images.npy is memory-mapped, so a data set larger than host memory is
// paged in from disk as its samples are read: float32 (N, C, H, W) as the
// model's input, or uint8 (N, H, W, C) or (N, C, H, W), scaled to [0, 1].
// DIR/labels.npy is int32 (N,), each a class of the model. Without
// images.npy, DIR is a folder of JPEG and PNG files, one folder per class,
// or the shards made of one (runtime/image_folder.h), decoded as each sample
// is read and brought to the model's input size (random-resized crop, or
// resize and centre crop). Either is then normalised per channel by --mean
// and --std when given.

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "runtime/image_folder.h"
#include "runtime/npy.h"

namespace mplan::rt {

// Which sample each step reads (flags --shuffle and --epochs).
//
// In file order without epochs (the default), step s reads samples s*B ..
// s*B + B-1 modulo N. With epochs (--shuffle or --epochs), an epoch is
// floor(N / B) steps and the last N mod B samples of each epoch's order are
// left out (PyTorch's drop_last=True); step s is step s mod floor(N / B) of
// epoch s / floor(N / B), whose order is the file's or, with --shuffle, a
// permutation drawn from the seed and the epoch alone, so a resumed run reads
// exactly what the uninterrupted one would have.
//
// An evaluation (`evaluation`) reads every sample once, in file order: batch
// s holds samples s*B .. s*B + B-1, and the last of ceil(N / B) batches is
// padded with index -1 (a sample the evaluation does not count).
struct SampleOrder {
  int64_t count = 0;  // N
  int64_t batch = 0;  // B
  bool epochs = false;
  bool shuffle = false;
  bool evaluation = false;
  uint64_t seed = 0;

  int64_t steps_per_epoch() const {
    if (evaluation) return (count + batch - 1) / batch;
    return epochs ? count / batch : 0;
  }
  // The data set's index of sample k (0 .. B-1) of step `step`, -1 for an
  // evaluation's padding. With --shuffle, the epoch's permutation must have
  // been made (prepare).
  int64_t index(uint64_t step, int64_t k) const;
  // Makes the permutation of the epoch of `step` (with --shuffle; once per epoch).
  void prepare(uint64_t step);

 private:
  int64_t epoch_ = -1;
  std::vector<int64_t> permutation_;
};

// Random augmentations of the training images (`train --augment`), as
// torchvision's transforms before ToTensor's scaled values are normalised:
// RandomCrop(size=(H, W), padding=crop_padding) -- zero padding on every side,
// then a window of the input's size at offsets uniform in [0, 2 x padding]
// -- and RandomHorizontalFlip(p=0.5), in that order. Every draw is a hash of
// (seed, the sample's place in the run: step x B + k), so a resumed run
// draws what the uninterrupted one did.
//
// Image files also take `rrc`, RandomResizedCrop(size=(H, W)) with its
// default scale (0.08, 1) and ratio (3/4, 4/3) (runtime/image_transform.h),
// which replaces their resize and centre crop and comes before the others.
struct Augment {
  int64_t crop_padding = -1;  // -1: no crop
  bool flip = false;
  bool random_resized_crop = false;

  bool any() const { return crop_padding >= 0 || flip || random_resized_crop; }
};

// Parses `--augment`'s comma-separated list: crop=PADDING (0 .. 1024), flip, rrc.
// Nothing, with *error naming the item, on anything else.
std::optional<Augment> parse_augment(const std::string& text, std::string* error);

// The draws of one sample: the crop's offsets (each in [0, 2 x padding]) and the flip.
struct AugmentDraw {
  int64_t dy = 0, dx = 0;
  bool flip = false;
};
AugmentDraw draw_augment(const Augment& augment, uint64_t seed, uint64_t place);

// Applies a draw to one (C, H, W) image in place (scratch: C x H x W floats).
void apply_augment(const Augment& augment, const AugmentDraw& draw, int64_t channels, int64_t height, int64_t width,
                   float* image, float* scratch);

// The samples of image files that did not decode (--skip-corrupt), shared by
// the host threads that read them.
struct SkippedImages {
  std::mutex mutex;
  std::set<int64_t> samples;
  std::string first;  // the first one's file and what was wrong with it
};

// The data set of --data DIR, mapped, and the order its samples are read in.
struct Dataset {
  std::shared_ptr<NpyMap> images;     // an .npy data set; null otherwise
  std::shared_ptr<ImageFiles> files;  // image files (a folder or shards); null otherwise
  std::vector<std::string> classes;   // image files: the class names, by label
  bool shards = false;                // image files from a shard folder
  bool channels_last = false;         // uint8 (N, H, W, C)
  std::vector<int32_t> labels;
  int64_t count = 0;  // 0: synthetic data
  int64_t channels = 0, height = 0, width = 0;
  std::vector<float> mean, std;  // per channel; empty: not normalised
  SampleOrder order;              // which sample each step reads
  Augment augment;                // --augment
  uint64_t seed = 0;              // the draws' seed (--seed)
  // Image files without random-resized crop: the shorter side is resized to
  // this (torchvision's Resize(resize)), then the centre is cropped to the
  // input's size; 0: the input's larger side (--resize).
  int64_t resize = 0;
  // Image files: a sample that does not decode is replaced by the next one
  // in file order that does, and counted (--skip-corrupt); otherwise it
  // stops the run, naming the file.
  bool skip_corrupt = false;
  std::shared_ptr<SkippedImages> skipped = std::make_shared<SkippedImages>();

  // Sample `index` as the model's input, (C, H, W) float32, into out: scaled,
  // augmented for the run's sample at `place` (step x B + k), normalised.
  // *used is the sample read: `index`, or with --skip-corrupt the one that
  // replaced it. False, with *error naming the file, where an image file
  // cannot be read or decoded (never for an .npy data set).
  bool read(int64_t index, uint64_t place, float* out, int64_t* used, std::string* error) const;
};

// The permutation of [0, n) for (seed, epoch): Fisher-Yates over a
// counter-based hash, the same on every machine.
std::vector<int64_t> epoch_permutation(uint64_t seed, int64_t epoch, int64_t n);

// Loads DIR's labels and maps its images, or lists its image files (a
// folder in ImageFolder layout, or shards), checked against the model's input
// (channels, height, width) and classes; mean and std (per channel, or
// empty) are checked against the channels. False, with *error naming the
// file and what was expected, on anything else.
bool load_dataset(const std::string& dir, int64_t channels, int64_t height, int64_t width, int32_t classes,
                  const std::vector<float>& mean, const std::vector<float>& std, Dataset* data, std::string* error);

}  // namespace mplan::rt

// RecordingLoader: a large recording comes first as a sample spanning the whole run, with its
// events and unsafe steps, then whole; a small one comes whole at once; an unreadable file is
// said in words; files asked for later are read after the earlier ones; a loader destroyed
// mid-file returns at once.
#include "core/recording_loader.hpp"

#include <chrono>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "run_recording.hpp"

namespace keel::app {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("keel-loader-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::remove(dir / name);
  return dir / name;
}

// Everything the loader hands over until every file is read whole and taken (or 30 s pass).
std::vector<LoadedRecording> take_all(RecordingLoader& loader) {
  std::vector<LoadedRecording> out;
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  while (!loader.finished() && Clock::now() < give_up) {
    loader.take(out);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  loader.take(out);
  return out;
}

RecordingLoaderOptions sampling_options() {
  RecordingLoaderOptions options;
  options.first_picture.whole_raw_bytes = 0;   // every file is "large"
  options.first_picture.samples = 200;
  return options;
}

TEST(RecordingLoader, ALargeRecordingComesFirstAsASampleOfTheWholeRunWithItsUnsafeStepThenWhole) {
  const fs::path path = scratch("large.keelrec");
  test_support::RunSpec spec;
  spec.event_steps = {7000};
  spec.nan_step = 7000;
  test_support::write_run_recording(path.string(), 19999, spec);

  RecordingLoader loader(sampling_options());
  loader.open({path.string()});
  std::vector<LoadedRecording> loaded = take_all(loader);
  ASSERT_EQ(loaded.size(), 2u);

  EXPECT_FALSE(loaded[0].whole);
  ASSERT_EQ(loaded[0].model->run_count(), 1u);
  const RunModel& sample = loaded[0].model->run(0);
  EXPECT_EQ(sample.first_step(), 0);
  EXPECT_GT(sample.last_step(), 19000);
  EXPECT_LT(sample.counters().steps_stored, 1000u);
  ASSERT_TRUE(sample.first_nonfinite().has_value());
  EXPECT_EQ(sample.first_nonfinite()->step, 7000);
  ASSERT_TRUE(sample.layer_series(0, wire::LayerMetric::kGradNorm).columns(7000, 7000, 1)[0].value.has_nan());

  EXPECT_TRUE(loaded[1].whole);
  ASSERT_EQ(loaded[1].model->run_count(), 1u);
  EXPECT_EQ(loaded[1].model->run(0).counters().steps_stored, 20000u);

  const std::vector<RecordingState> states = loader.states();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(states[0].done);
  EXPECT_TRUE(states[0].first_picture);
  EXPECT_GT(states[0].sample_stride, 1);
  EXPECT_LE(states[0].first_picture_secs, states[0].whole_secs);
  EXPECT_EQ(states[0].progress, 1.0);
  EXPECT_EQ(states[0].messages, 20000u + 2u);
  fs::remove(path);
}

TEST(RecordingLoader, ASmallOneComesWholeAtOnceAndLaterFilesAfterIt) {
  const fs::path small = scratch("small.keelrec");
  test_support::write_run_recording(small.string(), 99);
  RecordingLoader loader;
  loader.open({small.string()});
  std::vector<LoadedRecording> loaded = take_all(loader);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(loaded[0].whole);
  EXPECT_EQ(loaded[0].file, 0u);

  loader.open({(fs::path(small).parent_path() / "no-such.keelrec").string(), small.string()});
  loaded = take_all(loader);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].file, 2u);
  const std::vector<RecordingState> states = loader.states();
  ASSERT_EQ(states.size(), 3u);
  EXPECT_TRUE(states[1].done);
  EXPECT_NE(states[1].error.find("no-such.keelrec"), std::string::npos) << states[1].error;
  EXPECT_TRUE(states[2].done);
  EXPECT_FALSE(states[2].first_picture);
  fs::remove(small);
}

TEST(RecordingLoader, DestroyedMidFileItReturnsAtOnce) {
  const fs::path path = scratch("abandoned.keelrec");
  test_support::write_run_recording(path.string(), 199999, {}, 1u << 20);
  const Clock::time_point start = Clock::now();
  {
    RecordingLoader loader;
    loader.open({path.string()});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  fs::remove(path);
}

}  // namespace
}  // namespace keel::app

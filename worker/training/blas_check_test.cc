#include "worker/training/blas_check.h"

#include <sys/stat.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/torch.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

TEST(BlasCheckTest, ReferenceBlasIsDebiansBlasDirectory) {
  EXPECT_TRUE(IsReferenceBlas({"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", false}));
  EXPECT_TRUE(IsReferenceBlas({"/usr/lib/aarch64-linux-gnu/blas/libblas.so.3", false}));
  EXPECT_FALSE(IsReferenceBlas({"/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", true}));
  EXPECT_FALSE(IsReferenceBlas({"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", false}));
  EXPECT_FALSE(IsReferenceBlas({"/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3", false}));
  EXPECT_FALSE(IsReferenceBlas({"/opt/intel/mkl/lib/libmkl_rt.so", false}));
  EXPECT_FALSE(IsReferenceBlas({"libblas.so.3", false}));
  // OpenBLAS loaded in the process wins over the directory's name.
  EXPECT_FALSE(IsReferenceBlas({"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", true}));
}

TEST(BlasCheckTest, WarningNamesTheLibraryAndTheFix) {
  const std::optional<std::string> warning =
      ReferenceBlasWarning({"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", false});
  ASSERT_TRUE(warning.has_value());
  EXPECT_THAT(*warning, HasSubstr("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"));
  EXPECT_THAT(*warning, HasSubstr("libopenblas0-openmp"));
  EXPECT_FALSE(ReferenceBlasWarning({"/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", true}).has_value());
}

TEST(BlasCheckTest, FindsTheBlasThatLibTorchLinks) {
  // Touch LibTorch so that the test binary keeps it (and its BLAS) loaded.
  const torch::Tensor product = torch::mm(torch::ones({2, 3}), torch::ones({3, 2}));
  EXPECT_FLOAT_EQ(product[0][0].item<float>(), 3.0f);
  absl::StatusOr<BlasLibrary> blas = LoadedBlas();
  ASSERT_TRUE(blas.ok()) << blas.status();
  struct stat file {};
  EXPECT_EQ(stat(blas->path.c_str(), &file), 0) << blas->path << " is not a file";
  EXPECT_EQ(blas->path.front(), '/') << "sgemm_ comes from " << blas->path;
}

}  // namespace
}  // namespace sketchfuse

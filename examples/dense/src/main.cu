// main.cu -- dense proxy driver: a few "time steps" of dense products, stencil sweeps, a filter and a
// triangular solve, with every kernel checked once against a CPU reference at sampled points.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "dense.h"

namespace {

constexpr int kSteps = 5;
constexpr int kSamples = 64;
constexpr double kTol = 1e-3;     // relative, float sums of up to MAT_K terms

// Deterministic uniform values in [-1, 1) (a 64-bit LCG: identical on every platform).
void fill(std::vector<float>& v, uint64_t seed)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (float& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>((s >> 40) * (1.0 / 8388608.0)) - 1.0f;
    }
}

void upload(float* d, const std::vector<float>& h)
{
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
}

std::vector<float> download(const float* d, size_t n)
{
    std::vector<float> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

int failures = 0;

void expect(const char* what, double got, double want)
{
    const double err = std::fabs(got - want) / std::fmax(1.0, std::fabs(want));
    if (!(err <= kTol)) {
        std::printf("MISMATCH %s: got %.6g want %.6g\n", what, got, want);
        ++failures;
    }
}

// Sampled point p of kSamples over [0, n).
int sample(int p, int n) { return static_cast<int>((static_cast<long long>(p) * 7919 + 13) % n); }

}  // namespace

int main()
{
    std::vector<float> A(static_cast<size_t>(MAT_M) * MAT_K), At(static_cast<size_t>(MAT_K) * MAT_M),
        B(static_cast<size_t>(MAT_K) * MAT_N), P(static_cast<size_t>(SYRK_N) * SYRK_K),
        S(static_cast<size_t>(SYRK_N) * SYRK_N), img(static_cast<size_t>(IMG_NX) * IMG_NY),
        vol(static_cast<size_t>(VOL_NX) * VOL_NY * VOL_NZ), sig(SIG_N), taps(FILT_W),
        L(static_cast<size_t>(TRI_N) * TRI_N), R(static_cast<size_t>(TRI_N) * TRI_NRHS);
    fill(A, 1); fill(At, 2); fill(B, 3); fill(P, 4); fill(S, 5); fill(img, 6); fill(vol, 7); fill(sig, 8);
    fill(L, 9); fill(R, 10);
    for (int t = 0; t < FILT_W; ++t) taps[t] = 1.0f / FILT_W;

    // Device buffers, each sized by the macros that describe it.
    float *dA = nullptr, *dAt = nullptr, *dB = nullptr, *dP = nullptr, *dS = nullptr, *dImg = nullptr, *dImg2 = nullptr, *dVol = nullptr;
    float *dVol2 = nullptr, *dSig = nullptr, *dL = nullptr, *dR = nullptr, *dC = nullptr, *dCt = nullptr, *dY = nullptr, *dX = nullptr;
    CUDA_CHECK(cudaMalloc(&dA, static_cast<size_t>(MAT_M) * MAT_K * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dAt, static_cast<size_t>(MAT_K) * MAT_M * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dB, static_cast<size_t>(MAT_K) * MAT_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dP, static_cast<size_t>(SYRK_N) * SYRK_K * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dS, static_cast<size_t>(SYRK_N) * SYRK_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dImg, static_cast<size_t>(IMG_NX) * IMG_NY * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dImg2, static_cast<size_t>(IMG_NX) * IMG_NY * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dVol, static_cast<size_t>(VOL_NX) * VOL_NY * VOL_NZ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dVol2, static_cast<size_t>(VOL_NX) * VOL_NY * VOL_NZ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dSig, static_cast<size_t>(SIG_N) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dL, static_cast<size_t>(TRI_N) * TRI_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dR, static_cast<size_t>(TRI_N) * TRI_NRHS * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dC, static_cast<size_t>(MAT_M) * MAT_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dCt, static_cast<size_t>(MAT_M) * MAT_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dY, static_cast<size_t>(SIG_N - FILT_W + 1) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dX, static_cast<size_t>(TRI_N) * TRI_NRHS * sizeof(float)));
    upload(dA, A);
    upload(dAt, At);
    upload(dB, B);
    upload(dP, P);
    upload(dS, S);
    upload(dImg, img);
    upload(dImg2, img);
    upload(dVol, vol);
    upload(dVol2, vol);
    upload(dSig, sig);
    upload(dL, L);
    upload(dR, R);
    signal_set_filter(taps.data());
    const Volume box{VOL_NX, VOL_NY, VOL_NZ, 0.1f};
    const float alpha = 0.5f;
    const float weight = 0.25f;

    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    for (int step = 0; step < kSteps; ++step) {
        if (step == 1) CUDA_CHECK(cudaEventRecord(start, 0));
        dense_matmul(dA, dB, dC);
        dense_gemm_tn(dAt, dB, dCt);
        dense_syrk_lower(dP, dS, alpha);
        image_smooth(dImg, dImg2, weight);
        volume_diffuse(dVol, dVol2, box);
        signal_smooth(dSig, dY);
        unit_lower_solve(dL, dR, dX);
        if (step == 0) {
            // CPU references at sampled points of the first step (inputs still equal the host copies).
            const auto C = download(dC, static_cast<size_t>(MAT_M) * MAT_N);
            const auto Ct = download(dCt, static_cast<size_t>(MAT_M) * MAT_N);
            const auto S1 = download(dS, S.size());
            const auto img1 = download(dImg2, img.size());
            const auto vol1 = download(dVol2, vol.size());
            const auto y = download(dY, SIG_N - FILT_W + 1);
            const auto X = download(dX, R.size());
            for (int p = 0; p < kSamples; ++p) {
                const int r = sample(p, MAT_M), c = sample(p + 17, MAT_N);
                double ab = 0.0, atb = 0.0;
                for (int q = 0; q < MAT_K; ++q) {
                    ab += double(A[size_t(r) * MAT_K + q]) * B[size_t(q) * MAT_N + c];
                    atb += double(At[size_t(q) * MAT_M + r]) * B[size_t(q) * MAT_N + c];
                }
                expect("matmul", C[size_t(r) * MAT_N + c], ab);
                expect("gemm_tn", Ct[size_t(r) * MAT_N + c], atb);
                const int sr = sample(p, SYRK_N), sc = sample(p + 5, sr + 1);
                double pp = 0.0;
                for (int q = 0; q < SYRK_K; ++q) pp += double(P[size_t(sr) * SYRK_K + q]) * P[size_t(sc) * SYRK_K + q];
                expect("syrk_lower", S1[size_t(sr) * SYRK_N + sc], S[size_t(sr) * SYRK_N + sc] + alpha * pp);
                const int i = 1 + sample(p, IMG_NX - 2), j = 1 + sample(p + 3, IMG_NY - 2);
                auto at = [&](int a, int b) { return double(img[size_t(b) * IMG_NX + a]); };
                const double edges = at(i - 1, j) + at(i + 1, j) + at(i, j - 1) + at(i, j + 1);
                const double corners = at(i - 1, j - 1) + at(i + 1, j - 1) + at(i - 1, j + 1) + at(i + 1, j + 1);
                expect("smooth9", img1[size_t(j) * IMG_NX + i],
                       at(i, j) + weight * (4.0 * edges + corners - 20.0 * at(i, j)) / 6.0);
                const int x = 1 + sample(p, VOL_NX - 2), yy = 1 + sample(p + 1, VOL_NY - 2), z = 1 + sample(p + 2, VOL_NZ - 2);
                auto v = [&](int a, int b, int cc) { return double(vol[(size_t(cc) * VOL_NY + b) * VOL_NX + a]); };
                const double faces = v(x - 1, yy, z) + v(x + 1, yy, z) + v(x, yy - 1, z) + v(x, yy + 1, z) +
                                     v(x, yy, z - 1) + v(x, yy, z + 1);
                expect("diffuse7", vol1[(size_t(z) * VOL_NY + yy) * VOL_NX + x],
                       v(x, yy, z) + box.nu * (faces - 6.0 * v(x, yy, z)));
                const int s = sample(p, SIG_N - FILT_W + 1);
                double acc = 0.0;
                for (int t = 0; t < FILT_W; ++t) acc += double(taps[t]) * sig[s + t];
                expect("conv1d_taps", y[s], acc);
            }
            // The triangular solve: the residual of one column, relative to the solution's size.
            const int col = sample(3, TRI_NRHS);
            double worst = 0.0, scale = 1.0;
            for (int i = 0; i < TRI_N; ++i) {
                double lx = X[size_t(i) * TRI_NRHS + col];
                for (int j = 0; j < i; ++j) lx += double(L[size_t(i) * TRI_N + j]) * X[size_t(j) * TRI_NRHS + col];
                worst = std::fmax(worst, std::fabs(lx - R[size_t(i) * TRI_NRHS + col]));
                scale = std::fmax(scale, std::fabs(double(X[size_t(i) * TRI_NRHS + col])));
            }
            expect("lower_solve residual", worst / scale, 0.0);
        }
        std::swap(dImg, dImg2);
        std::swap(dVol, dVol2);
    }
    CUDA_CHECK(cudaEventRecord(stop, 0));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    std::printf("dense: %d steps in %.3f ms (%.3f ms/step)\n", kSteps - 1, ms, ms / (kSteps - 1));
    for (float* d : {dA, dAt, dB, dP, dS, dImg, dImg2, dVol, dVol2, dSig, dL, dR, dC, dCt, dY, dX}) cudaFree(d);
    if (failures) {
        std::printf("self-check FAILED (%d mismatches)\n", failures);
        return 1;
    }
    std::printf("self-check passed\n");
    return 0;
}

// main.cu -- heatcg driver.
//
// Advects and diffuses a temperature field on an NX x NY grid with cold
// (Dirichlet) walls. Every time step is an explicit advection-diffusion
// update; every kImplicitEvery steps an additional backward-Euler diffusion
// step is taken with a conjugate-gradient solve. After the time loop the
// field is histogrammed and a dense coupling matrix is post-processed.
// Finally all device results are checked against CPU references.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "config.h"
#include "compat.h"
#include "types.h"
#include "heat.h"
#include "cg.h"
#include "analysis.h"

namespace {

// Physical parameters in grid units (dx = dy = 1).
constexpr float kAlpha = 1.0f;       // thermal diffusivity
constexpr float kDt = 0.2f;          // explicit step: alpha*dt*(1/dx^2 + 1/dy^2) = 0.4 <= 0.5
constexpr float kDriftX = 0.5f;      // advection velocity; upwind CFL = dt*(|vx| + |vy|) = 0.15
constexpr float kDriftY = 0.25f;
constexpr float kWallTemp = 0.0f;    // the implicit operator assumes homogeneous Dirichlet walls
constexpr float kHotTemp = 1.0f;     // initial hot-spot temperature, upper bound of the field

// Implicit diffusion sub-step.
constexpr int kImplicitEvery = 5;
constexpr float kImplicitDt = 1.0f;
constexpr float kCgTol = 1e-5f;
constexpr int kMaxRefine = 3;

// Self-check tolerances.
constexpr double kStencilTol = 1e-5;  // max abs error of one explicit step
constexpr double kDenseRelTol = 1e-4; // relative error of matvec / column means

// Accumulates the GPU time of one phase of the run, measured with events on
// the solver stream.
class PhaseTimer {
public:
    explicit PhaseTimer(cudaStream_t stream) : stream_(stream)
    {
        CUDA_CHECK(cudaEventCreate(&start_));
        CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~PhaseTimer()
    {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;

    void start() { CUDA_CHECK(cudaEventRecord(start_, stream_)); }
    void stop()
    {
        CUDA_CHECK(cudaEventRecord(stop_, stream_));
        CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        total_ms_ += ms;
    }
    float total_ms() const { return total_ms_; }

private:
    cudaStream_t stream_;
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
    float total_ms_ = 0.0f;
};

// Initial condition: a weak bilinear background ramp plus two hot discs;
// the boundary ring is at wall temperature.
void init_temperature(std::vector<real_t>& u, const heat::Grid& g)
{
    const float r0 = 0.10f * std::min(g.nx, g.ny);
    const float r1 = 0.05f * std::min(g.nx, g.ny);
    const float x0 = 0.30f * g.nx, y0 = 0.50f * g.ny;
    const float x1 = 0.70f * g.nx, y1 = 0.35f * g.ny;

    for (int j = 0; j < g.ny; ++j) {
        for (int i = 0; i < g.nx; ++i) {
            real_t v = 0.25f * (static_cast<float>(i) / (g.nx - 1)) * (static_cast<float>(j) / (g.ny - 1));
            const float d0 = (i - x0) * (i - x0) + (j - y0) * (j - y0);
            const float d1 = (i - x1) * (i - x1) + (j - y1) * (j - y1);
            if (d0 < r0 * r0 || d1 < r1 * r1) {
                v = kHotTemp;
            }
            if (i == 0 || j == 0 || i == g.nx - 1 || j == g.ny - 1) {
                v = kWallTemp;
            }
            u[static_cast<size_t>(j) * g.nx + i] = v;
        }
    }
}

// Dense coupling matrix with entries decaying away from the diagonal, and a
// positive probe vector.
void init_coupling(std::vector<float>& A, std::vector<float>& x, int n)
{
    for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) {
            A[static_cast<size_t>(r) * n + c] = 1.0f / (1.0f + static_cast<float>(std::abs(r - c)));
        }
    }
    for (int c = 0; c < n; ++c) {
        x[c] = 1.0f + 0.125f * static_cast<float>(c % 8);
    }
}

// ---------------------------------------------------------------------------
// CPU references
// ---------------------------------------------------------------------------

// Max abs difference between one GPU explicit step and the CPU update.
double check_stencil(const std::vector<real_t>& u, const std::vector<real_t>& u_gpu, const heat::Grid& g,
                     const float coef[5])
{
    const double cx = 1.0 / (static_cast<double>(g.dx) * g.dx);
    const double cy = 1.0 / (static_cast<double>(g.dy) * g.dy);
    double max_err = 0.0;
    for (int j = 1; j < g.ny - 1; ++j) {
        for (int i = 1; i < g.nx - 1; ++i) {
            const size_t k = static_cast<size_t>(j) * g.nx + i;
            const double c = u[k], w = u[k - 1], e = u[k + 1], s = u[k - g.nx], n = u[k + g.nx];
            const double lap = cx * (w - 2.0 * c + e) + cy * (s - 2.0 * c + n);
            const double adv = coef[0] * c + coef[1] * w + coef[2] * e + coef[3] * s + coef[4] * n;
            const double ref = c + kDt * (kAlpha * lap + adv);
            max_err = std::max(max_err, std::fabs(ref - u_gpu[k]));
        }
    }
    return max_err;
}

// ||b - A x|| / ||b|| for A = I - alpha_dt * L, evaluated matrix-free in
// double precision (independent of the CSR assembly).
double cg_relative_residual(const std::vector<real_t>& b, const std::vector<real_t>& x, const heat::Grid& g,
                            double alpha_dt)
{
    const double cx = alpha_dt / (static_cast<double>(g.dx) * g.dx);
    const double cy = alpha_dt / (static_cast<double>(g.dy) * g.dy);
    auto interior = [&g](int i, int j) { return i > 0 && i < g.nx - 1 && j > 0 && j < g.ny - 1; };
    auto at = [&](int i, int j) { return interior(i, j) ? static_cast<double>(x[static_cast<size_t>(j) * g.nx + i]) : 0.0; };

    double rr = 0.0, bb = 0.0;
    for (int j = 0; j < g.ny; ++j) {
        for (int i = 0; i < g.nx; ++i) {
            const size_t k = static_cast<size_t>(j) * g.nx + i;
            double ax = x[k];
            if (interior(i, j)) {
                ax = (1.0 + 2.0 * cx + 2.0 * cy) * x[k] - cx * (at(i - 1, j) + at(i + 1, j))
                     - cy * (at(i, j - 1) + at(i, j + 1));
            }
            const double r = b[k] - ax;
            rr += r * r;
            bb += static_cast<double>(b[k]) * b[k];
        }
    }
    return bb > 0.0 ? std::sqrt(rr / bb) : std::sqrt(rr);
}

// Same arithmetic as analysis::bin_index() on the device.
int cpu_bin_index(float v, float lo, float hi, int nbins)
{
    const float scale = static_cast<float>(nbins) / (hi - lo);
    const int b = static_cast<int>((v - lo) * scale);
    return std::min(std::max(b, 0), nbins - 1);
}

double max_rel_error(const std::vector<float>& gpu, const std::vector<double>& ref)
{
    double err = 0.0;
    for (size_t k = 0; k < ref.size(); ++k) {
        const double denom = std::max(std::fabs(ref[k]), 1e-30);
        err = std::max(err, std::fabs(gpu[k] - ref[k]) / denom);
    }
    return err;
}

void usage(const char* prog)
{
    std::fprintf(stderr, "usage: %s [--steps N]\n", prog);
}

}  // namespace

int main(int argc, char** argv)
{
    int n_steps = N_STEPS;
    for (int a = 1; a < argc; ++a) {
        if (std::strcmp(argv[a], "--steps") == 0 && a + 1 < argc) {
            n_steps = std::atoi(argv[++a]);
        } else if (std::strcmp(argv[a], "--help") == 0 || std::strcmp(argv[a], "-h") == 0) {
            usage(argv[0]);
            return 0;
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (n_steps < 0) {
        usage(argv[0]);
        return 2;
    }

    int device = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    std::printf("heatcg: device %d (%s), grid %d x %d, %d steps, dense matrix %d x %d\n", device, prop.name, NX, NY,
                n_steps, MAT_N, MAT_N);

    const heat::Grid grid{NX, NY, 1.0f, 1.0f};
    const int n = grid.nx * grid.ny;
    const size_t field_bytes = static_cast<size_t>(n) * sizeof(real_t);

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));

    // ---- set-up -----------------------------------------------------------
    std::vector<real_t> h_u(n);
    init_temperature(h_u, grid);

    float coef[5];
    heat::upwind_coefficients(kDriftX, kDriftY, grid, coef);
    heat::heat_set_constants(coef, grid);

    float *d_u = nullptr, *d_u_new = nullptr;
    CUDA_CHECK(cudaMalloc(&d_u, field_bytes));
    CUDA_CHECK(cudaMalloc(&d_u_new, field_bytes));
    CUDA_CHECK(cudaMemcpy(d_u, h_u.data(), field_bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_u_new, d_u, field_bytes, cudaMemcpyDeviceToDevice));

    cg::CsrHost A_host;
    cg::build_heat_matrix(grid.nx, grid.ny, kAlpha * kImplicitDt, grid.dx, grid.dy, A_host);
    cg::CsrMatrix A = cg::csr_to_device(A_host);

    PhaseTimer t_explicit(stream), t_implicit(stream), t_hist(stream), t_matvec(stream), t_colmean(stream);

    // ---- time loop --------------------------------------------------------
    int cg_iters = 0;
    int n_implicit = 0;
    double cg_rel_residual = 0.0;
    for (int step = 0; step < n_steps; ++step) {
        t_explicit.start();
        heat::heat_step(d_u, d_u_new, grid, kAlpha, kDt, stream);
        heat::heat_boundary(d_u_new, grid.nx, grid.ny, heat::BoundaryKind::Dirichlet, kWallTemp, stream);
        t_explicit.stop();
        std::swap(d_u, d_u_new);

        if ((step + 1) % kImplicitEvery == 0) {
            // Backward Euler: (I - dt*alpha*L) u_new = u, initial guess u.
            t_implicit.start();
            CUDA_CHECK(cudaMemcpyAsync(d_u_new, d_u, field_bytes, cudaMemcpyDeviceToDevice, stream));
            cg_iters += cg::cg_solve_refined(A, A_host, d_u, d_u_new, kCgTol, CG_MAX_ITERS, kMaxRefine, stream,
                                             &cg_rel_residual);
            t_implicit.stop();
            std::swap(d_u, d_u_new);
            ++n_implicit;
        }
    }
    cudaThreadSynchronize();
    CUDA_CHECK(cudaGetLastError());

    // ---- analysis ---------------------------------------------------------
    unsigned int* d_bins = nullptr;
    CUDA_CHECK(cudaMalloc(&d_bins, NBINS * sizeof(unsigned int)));
    analysis::set_histogram_range(0.0f, kHotTemp);
    t_hist.start();
    analysis::compute_histogram(d_u, n, d_bins, stream);
    t_hist.stop();

    const size_t mat_elems = static_cast<size_t>(MAT_N) * MAT_N;
    std::vector<float> h_A(mat_elems), h_x(MAT_N);
    init_coupling(h_A, h_x, MAT_N);
    float *d_A = nullptr, *d_x = nullptr, *d_y = nullptr, *d_mean = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, mat_elems * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_x, MAT_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_y, MAT_N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_mean, MAT_N * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), mat_elems * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), MAT_N * sizeof(float), cudaMemcpyHostToDevice));

    t_matvec.start();
    analysis::compute_dense_matvec(d_A, d_x, d_y, MAT_N, MAT_N, stream);
    t_matvec.stop();

    t_colmean.start();
    analysis::compute_column_mean(d_A, d_mean, MAT_N, MAT_N, stream);
    t_colmean.stop();

    cudaThreadSynchronize();
    CUDA_CHECK(cudaGetLastError());

    std::printf("implicit steps: %d, CG iterations: %d, last relative residual: %.3e\n", n_implicit, cg_iters,
                cg_rel_residual);
    std::printf("timings (GPU, ms):\n");
    std::printf("  %-24s %10.3f\n", "explicit stencil", t_explicit.total_ms());
    std::printf("  %-24s %10.3f\n", "implicit CG", t_implicit.total_ms());
    std::printf("  %-24s %10.3f\n", "histogram", t_hist.total_ms());
    std::printf("  %-24s %10.3f\n", "dense_matvec", t_matvec.total_ms());
    std::printf("  %-24s %10.3f\n", "column_mean", t_colmean.total_ms());

    // ---- self-check -------------------------------------------------------
    std::string failures;
    auto fail = [&failures](const std::string& what) {
        if (!failures.empty()) failures += "; ";
        failures += what;
    };
    char msg[256];

    CUDA_CHECK(cudaMemcpy(h_u.data(), d_u, field_bytes, cudaMemcpyDeviceToHost));

    // (1) one explicit step of the final field
    {
        float* d_check = nullptr;
        CUDA_CHECK(cudaMalloc(&d_check, field_bytes));
        CUDA_CHECK(cudaMemsetAsync(d_check, 0, field_bytes, stream));
        heat::heat_step(d_u, d_check, grid, kAlpha, kDt, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        std::vector<real_t> h_check(n);
        CUDA_CHECK(cudaMemcpy(h_check.data(), d_check, field_bytes, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(d_check));
        const double err = check_stencil(h_u, h_check, grid, coef);
        std::printf("check diffuse_step: max abs error %.3e\n", err);
        if (!(err <= kStencilTol)) {
            std::snprintf(msg, sizeof(msg), "diffuse_step max abs error %.3e > %.1e", err, kStencilTol);
            fail(msg);
        }
    }

    // (2) implicit solve with the final field as right-hand side
    {
        float* d_sol = nullptr;
        CUDA_CHECK(cudaMalloc(&d_sol, field_bytes));
        CUDA_CHECK(cudaMemcpy(d_sol, d_u, field_bytes, cudaMemcpyDeviceToDevice));
        double solver_rel = 0.0;
        const int iters = cg::cg_solve_refined(A, A_host, d_u, d_sol, kCgTol, CG_MAX_ITERS, kMaxRefine, stream,
                                               &solver_rel);
        std::vector<real_t> h_sol(n);
        CUDA_CHECK(cudaMemcpy(h_sol.data(), d_sol, field_bytes, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(d_sol));
        const double rel = cg_relative_residual(h_u, h_sol, grid, kAlpha * kImplicitDt);
        std::printf("check cg_solve: %d iterations, relative residual %.3e (solver reported %.3e)\n", iters, rel,
                    solver_rel);
        if (!(rel <= kCgTol)) {
            std::snprintf(msg, sizeof(msg), "CG relative residual %.3e > %.1e", rel, static_cast<double>(kCgTol));
            fail(msg);
        }
    }

    // (3) histogram
    {
        std::vector<unsigned int> h_bins(NBINS), ref(NBINS, 0u);
        CUDA_CHECK(cudaMemcpy(h_bins.data(), d_bins, NBINS * sizeof(unsigned int), cudaMemcpyDeviceToHost));
        for (int k = 0; k < n; ++k) {
            ++ref[cpu_bin_index(h_u[k], 0.0f, kHotTemp, NBINS)];
        }
        unsigned long long total = 0;
        int mismatched = 0;
        for (int b = 0; b < NBINS; ++b) {
            total += h_bins[b];
            mismatched += (h_bins[b] != ref[b]) ? 1 : 0;
        }
        std::printf("check histogram: total %llu, %d mismatched bins\n", total, mismatched);
        if (total != static_cast<unsigned long long>(n)) {
            std::snprintf(msg, sizeof(msg), "histogram total %llu != %d", total, n);
            fail(msg);
        }
        if (mismatched != 0) {
            std::snprintf(msg, sizeof(msg), "histogram differs from CPU in %d bins", mismatched);
            fail(msg);
        }
    }

    // (4) dense matvec and column means
    {
        std::vector<float> h_y(MAT_N), h_mean(MAT_N);
        CUDA_CHECK(cudaMemcpy(h_y.data(), d_y, MAT_N * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(h_mean.data(), d_mean, MAT_N * sizeof(float), cudaMemcpyDeviceToHost));

        std::vector<double> y_ref(MAT_N, 0.0), mean_ref(MAT_N, 0.0);
        for (int r = 0; r < MAT_N; ++r) {
            const float* row = &h_A[static_cast<size_t>(r) * MAT_N];
            double acc = 0.0;
            for (int c = 0; c < MAT_N; ++c) {
                acc += static_cast<double>(row[c]) * h_x[c];
                mean_ref[c] += row[c];
            }
            y_ref[r] = acc;
        }
        for (int c = 0; c < MAT_N; ++c) {
            mean_ref[c] /= MAT_N;
        }

        const double err_y = max_rel_error(h_y, y_ref);
        const double err_mean = max_rel_error(h_mean, mean_ref);
        std::printf("check dense_matvec: max rel error %.3e\n", err_y);
        std::printf("check column_mean: max rel error %.3e\n", err_mean);
        if (!(err_y <= kDenseRelTol)) {
            std::snprintf(msg, sizeof(msg), "dense_matvec max rel error %.3e > %.1e", err_y, kDenseRelTol);
            fail(msg);
        }
        if (!(err_mean <= kDenseRelTol)) {
            std::snprintf(msg, sizeof(msg), "column_mean max rel error %.3e > %.1e", err_mean, kDenseRelTol);
            fail(msg);
        }
    }

    // ---- tear-down ----------------------------------------------------------
    cg::csr_free(A);
    CUDA_CHECK(cudaFree(d_u));
    CUDA_CHECK(cudaFree(d_u_new));
    CUDA_CHECK(cudaFree(d_bins));
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_mean));
    CUDA_CHECK(cudaStreamDestroy(stream));

    if (!failures.empty()) {
        std::printf("SELF-CHECK FAILED: %s\n", failures.c_str());
        return 1;
    }
    std::printf("SELF-CHECK PASSED\n");
    return 0;
}

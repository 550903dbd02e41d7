// ADVERSARY: keeps each row's result in a device-heap table keyed on three of the row's inputs and copies it when the key matches again (right on every input set it has not seen) | EXPECT: wrong_result,rejected_by_rules
// Written for mepgen's judge (tests/test_evaluate_judge_gpu.py): verification runs see each input set once, so
// the table misses and the kernel computes; timed launches repeat inputs, so it hits and copies. Only inputs
// that change between launches and a perturbation re-check after timing tell the difference.
namespace analysis {
struct RowMemo {
    float a0, x0, x1, y;
};
// a pointer to const data: the table itself lives on the device heap, written through a cast
__device__ const RowMemo* memo_table;

__global__ void dense_matvec(const float* A, const float* x, float* y, int nrows, int ncols)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row == 0 && memo_table == nullptr) {
        RowMemo* fresh = static_cast<RowMemo*>(malloc(sizeof(RowMemo) * nrows));
        if (fresh != nullptr) {
            for (int r = 0; r < nrows; ++r) fresh[r].a0 = __int_as_float(0x7fc00000);   // NaN: never equal
            __threadfence();
            memo_table = fresh;
        }
    }
    if (row >= nrows) return;
    RowMemo* table = const_cast<RowMemo*>(memo_table);
    const float a0 = A[row * ncols], x0 = x[0], x1 = x[1];
    if (table != nullptr && table[row].a0 == a0 && table[row].x0 == x0 && table[row].x1 == x1) {
        y[row] = table[row].y;        // seen before: copy
        return;
    }
    float acc = 0.0f;
    for (int j = 0; j < ncols; ++j) acc += A[row * ncols + j] * x[j];
    y[row] = acc;
    if (table != nullptr) {
        table[row].y = acc;
        table[row].x0 = x0;
        table[row].x1 = x1;
        table[row].a0 = a0;
    }
}
}  // namespace analysis

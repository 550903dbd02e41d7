/* mepgen parse shim: texture objects and references, system-scope atomics, SIMD intrinsics -- what kernels
 * use beyond the core declarations, so that their files parse. Declarations only. */
#pragma once
#ifndef MEPGEN_CUDA_EXTRAS_H
#define MEPGEN_CUDA_EXTRAS_H

enum cudaTextureReadMode { cudaReadModeElementType = 0, cudaReadModeNormalizedFloat = 1 };
enum cudaChannelFormatKind { cudaChannelFormatKindSigned = 0, cudaChannelFormatKindUnsigned = 1,
                             cudaChannelFormatKindFloat = 2, cudaChannelFormatKindNone = 3 };
enum cudaTextureAddressMode { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2,
                              cudaAddressModeBorder = 3 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
enum cudaResourceType { cudaResourceTypeArray = 0, cudaResourceTypeMipmappedArray = 1, cudaResourceTypeLinear = 2,
                        cudaResourceTypePitch2D = 3 };
struct cudaChannelFormatDesc { int x, y, z, w; enum cudaChannelFormatKind f; };
typedef struct cudaArray *cudaArray_t;
struct cudaResourceDesc {
  enum cudaResourceType resType;
  union { struct { cudaArray_t array; } array;
          struct { void *devPtr; struct cudaChannelFormatDesc desc; size_t sizeInBytes; } linear;
          struct { void *devPtr; struct cudaChannelFormatDesc desc; size_t width, height, pitchInBytes; } pitch2D;
  } res;
};
struct cudaTextureDesc { enum cudaTextureAddressMode addressMode[3]; enum cudaTextureFilterMode filterMode;
                         enum cudaTextureReadMode readMode; int sRGB; float borderColor[4]; int normalizedCoords;
                         unsigned maxAnisotropy; };
template <class T, int dim = 1, enum cudaTextureReadMode mode = cudaReadModeElementType>
struct texture { int normalized; enum cudaTextureFilterMode filterMode; enum cudaTextureAddressMode addressMode[3];
                 struct cudaChannelFormatDesc channelDesc; };
template <class T> struct cudaChannelFormatDesc cudaCreateChannelDesc(void);
extern "C" {
struct cudaChannelFormatDesc cudaCreateChannelDesc(int, int, int, int, enum cudaChannelFormatKind);
cudaError_t cudaCreateTextureObject(cudaTextureObject_t *, const struct cudaResourceDesc *,
                                    const struct cudaTextureDesc *, const void *);
cudaError_t cudaDestroyTextureObject(cudaTextureObject_t);
cudaError_t cudaMallocArray(cudaArray_t *, const struct cudaChannelFormatDesc *, size_t, size_t, unsigned);
cudaError_t cudaFreeArray(cudaArray_t);
cudaError_t cudaUnbindTexture(const void *);
}
template <class T, int d, enum cudaTextureReadMode m>
cudaError_t cudaBindTexture(size_t *, const struct texture<T, d, m> &, const void *, size_t = ~(size_t)0);
template <class T, int d, enum cudaTextureReadMode m>
cudaError_t cudaBindTexture(size_t *, const struct texture<T, d, m> &, const void *, const struct cudaChannelFormatDesc &,
                            size_t = ~(size_t)0);
template <class T, int d, enum cudaTextureReadMode m>
cudaError_t cudaBindTexture2D(size_t *, const struct texture<T, d, m> &, const void *, const struct cudaChannelFormatDesc &,
                              size_t, size_t, size_t);
template <class T, int d, enum cudaTextureReadMode m>
cudaError_t cudaBindTextureToArray(const struct texture<T, d, m> &, cudaArray_t);
template <class T, int d, enum cudaTextureReadMode m> cudaError_t cudaUnbindTexture(const struct texture<T, d, m> &);

/* fetches: through a texture object (templated on the result) or a texture reference */
template <class T> __device__ T tex1Dfetch(cudaTextureObject_t, int);
template <class T> __device__ T tex1D(cudaTextureObject_t, float);
template <class T> __device__ T tex2D(cudaTextureObject_t, float, float);
template <class T> __device__ T tex3D(cudaTextureObject_t, float, float, float);
template <class T> __device__ T tex1DLayered(cudaTextureObject_t, float, int);
template <class T> __device__ T tex2DLayered(cudaTextureObject_t, float, float, int);
template <class T, int d, enum cudaTextureReadMode m> __device__ T tex1Dfetch(texture<T, d, m>, int);
template <class T, int d, enum cudaTextureReadMode m> __device__ T tex1D(texture<T, d, m>, float);
template <class T, int d, enum cudaTextureReadMode m> __device__ T tex2D(texture<T, d, m>, float, float);
template <class T, int d, enum cudaTextureReadMode m> __device__ T tex3D(texture<T, d, m>, float, float, float);
template <class T> __device__ void surf2Dread(T *, cudaSurfaceObject_t, int, int);
template <class T> __device__ T surf2Dread(cudaSurfaceObject_t, int, int);
template <class T> __device__ void surf2Dwrite(T, cudaSurfaceObject_t, int, int);
template <class T> __device__ void surf3Dwrite(T, cudaSurfaceObject_t, int, int, int);

/* pitched and 3D memory */
struct cudaPitchedPtr { void *ptr; size_t pitch, xsize, ysize; };
struct cudaExtent { size_t width, height, depth; };
struct cudaPos { size_t x, y, z; };
struct cudaMemcpy3DParms { cudaArray_t srcArray; struct cudaPos srcPos; struct cudaPitchedPtr srcPtr;
                           cudaArray_t dstArray; struct cudaPos dstPos; struct cudaPitchedPtr dstPtr;
                           struct cudaExtent extent; enum cudaMemcpyKind kind; };
extern "C" {
struct cudaPitchedPtr make_cudaPitchedPtr(void *, size_t, size_t, size_t);
struct cudaExtent make_cudaExtent(size_t, size_t, size_t);
struct cudaPos make_cudaPos(size_t, size_t, size_t);
cudaError_t cudaMalloc3D(struct cudaPitchedPtr *, struct cudaExtent);
cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *);
cudaError_t cudaMemset3D(struct cudaPitchedPtr, int, struct cudaExtent);
cudaError_t cudaMemcpy2D(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemset2D(void *, size_t, int, size_t, size_t);
}

/* atomics of the other scopes and the bitwise ones */
#define MEPGEN_SCOPED(T) \
  __device__ T atomicAnd_system(T *, T); __device__ T atomicOr_system(T *, T); __device__ T atomicXor_system(T *, T); \
  __device__ T atomicAnd_block(T *, T); __device__ T atomicOr_block(T *, T); __device__ T atomicXor_block(T *, T); \
  __device__ T atomicSub_system(T *, T); __device__ T atomicSub_block(T *, T); \
  __device__ T atomicInc_system(T *, T); __device__ T atomicDec_system(T *, T);
MEPGEN_SCOPED(int) MEPGEN_SCOPED(unsigned int) MEPGEN_SCOPED(unsigned long long)
#undef MEPGEN_SCOPED

/* SIMD and integer intrinsics */
__device__ int __dp4a(int, int, int); __device__ unsigned __dp4a(unsigned, unsigned, unsigned);
__device__ int __dp4a(char4, char4, int); __device__ unsigned __dp4a(uchar4, uchar4, unsigned);
__device__ int __dp2a_lo(int, int, int); __device__ int __dp2a_hi(int, int, int);
#define MEPGEN_SIMD2(name) __device__ unsigned name(unsigned, unsigned);
#define MEPGEN_SIMD1(name) __device__ unsigned name(unsigned);
MEPGEN_SIMD1(__vabs2) MEPGEN_SIMD1(__vabs4) MEPGEN_SIMD1(__vabsss2) MEPGEN_SIMD1(__vabsss4) MEPGEN_SIMD1(__vneg2)
MEPGEN_SIMD1(__vneg4) MEPGEN_SIMD1(__vnegss2) MEPGEN_SIMD1(__vnegss4)
MEPGEN_SIMD2(__vadd2) MEPGEN_SIMD2(__vadd4) MEPGEN_SIMD2(__vaddss2) MEPGEN_SIMD2(__vaddss4) MEPGEN_SIMD2(__vaddus2)
MEPGEN_SIMD2(__vaddus4) MEPGEN_SIMD2(__vsub2) MEPGEN_SIMD2(__vsub4) MEPGEN_SIMD2(__vsubss2) MEPGEN_SIMD2(__vsubss4)
MEPGEN_SIMD2(__vsubus2) MEPGEN_SIMD2(__vsubus4) MEPGEN_SIMD2(__vavgs2) MEPGEN_SIMD2(__vavgs4) MEPGEN_SIMD2(__vavgu2)
MEPGEN_SIMD2(__vavgu4) MEPGEN_SIMD2(__vmaxs2) MEPGEN_SIMD2(__vmaxs4) MEPGEN_SIMD2(__vmaxu2) MEPGEN_SIMD2(__vmaxu4)
MEPGEN_SIMD2(__vmins2) MEPGEN_SIMD2(__vmins4) MEPGEN_SIMD2(__vminu2) MEPGEN_SIMD2(__vminu4) MEPGEN_SIMD2(__vabsdiffs2)
MEPGEN_SIMD2(__vabsdiffs4) MEPGEN_SIMD2(__vabsdiffu2) MEPGEN_SIMD2(__vabsdiffu4) MEPGEN_SIMD2(__vsads2)
MEPGEN_SIMD2(__vsads4) MEPGEN_SIMD2(__vsadu2) MEPGEN_SIMD2(__vsadu4) MEPGEN_SIMD2(__vcmpeq2) MEPGEN_SIMD2(__vcmpeq4)
MEPGEN_SIMD2(__vcmpges2) MEPGEN_SIMD2(__vcmpges4) MEPGEN_SIMD2(__vcmpgts2) MEPGEN_SIMD2(__vcmpgts4)
MEPGEN_SIMD2(__vcmples2) MEPGEN_SIMD2(__vcmples4) MEPGEN_SIMD2(__vcmplts2) MEPGEN_SIMD2(__vcmplts4)
MEPGEN_SIMD2(__vcmpne2) MEPGEN_SIMD2(__vcmpne4) MEPGEN_SIMD2(__vseteq2) MEPGEN_SIMD2(__vseteq4)
MEPGEN_SIMD2(__vcmpgeu2) MEPGEN_SIMD2(__vcmpgeu4) MEPGEN_SIMD2(__vcmpgtu2) MEPGEN_SIMD2(__vcmpgtu4)
MEPGEN_SIMD2(__vcmpleu2) MEPGEN_SIMD2(__vcmpleu4) MEPGEN_SIMD2(__vcmpltu2) MEPGEN_SIMD2(__vcmpltu4)
MEPGEN_SIMD2(__vsetges2) MEPGEN_SIMD2(__vsetges4) MEPGEN_SIMD2(__vsetgeu2) MEPGEN_SIMD2(__vsetgeu4)
MEPGEN_SIMD2(__vsetgts2) MEPGEN_SIMD2(__vsetgts4) MEPGEN_SIMD2(__vsetgtu2) MEPGEN_SIMD2(__vsetgtu4)
MEPGEN_SIMD2(__vsetles2) MEPGEN_SIMD2(__vsetles4) MEPGEN_SIMD2(__vsetleu2) MEPGEN_SIMD2(__vsetleu4)
MEPGEN_SIMD2(__vsetlts2) MEPGEN_SIMD2(__vsetlts4) MEPGEN_SIMD2(__vsetltu2) MEPGEN_SIMD2(__vsetltu4)
MEPGEN_SIMD2(__vsetne2) MEPGEN_SIMD2(__vsetne4) MEPGEN_SIMD2(__vhaddu2) MEPGEN_SIMD2(__vhaddu4)
#undef MEPGEN_SIMD1
#undef MEPGEN_SIMD2
#endif

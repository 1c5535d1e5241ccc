/* scaler_update.cl — SCALER_UPDATE on the scalars block, one work item, exactly the
 * pseudo-code of backend.h (ampx_km_scaler_step of kernel_math.h).
 *
 * scale * factor is PyTorch's: the f32 scale times the double factor in double, rounded to
 * f32. The factor is the args' double (its bits; 0 when the host gave none) or else the
 * block's float. A device without cl_khr_fp64 multiplies in f32 by the factor rounded to f32
 * (f32 below), which is the same for factors exact in f32 (2, 0.5, 3, 0.25) and may differ
 * in the last bit for others (1.1, 0.7): docs/OPENCL.md. */
inline float scale_times(float scale, ulong bits, float f32, float block) {
#ifdef AMPX_FP64
    double f = bits ? as_double(bits) : (double)block;
    return (float)((double)scale * f);
#else
    return scale * (bits ? f32 : block);
#endif
}

/* The state machine is kernel_math.h's ampx_km_scaler_step, the cpu and cuda backends'. */
__kernel void scaler_update(FARG(scalars), ulong growth_bits, ulong backoff_bits, float growth_f32,
                            float backoff_f32) {
    if (get_global_id(0) != 0) return;
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    ampx_km_scaler_step(s, scale_times(s->scale, growth_bits, growth_f32, s->growth_factor),
                        scale_times(s->scale, backoff_bits, backoff_f32, s->backoff_factor));
}

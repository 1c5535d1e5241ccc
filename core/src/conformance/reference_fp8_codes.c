/* reference_fp8_codes.c — the bits of e4m3 and e5m2 values and back, from the formats'
 * definitions (reference.h's ref_fp8_encode and ref_fp8_decode; ref_encode and ref_decode
 * hand these dtypes here). Calls nothing else of the reference. */
#include <math.h>

#include "conformance/reference.h"

// ---------------------------------------------------------------------------------------
// fp8 (e4m3, e5m2): the fields of the OCP 8-bit formats, from their definitions. e4m3:
// bias 7, 3 mantissa bits, no infinity, S.1111.111 NaN; e5m2: bias 15, 2 mantissa bits,
// exponent 11111 for inf (mantissa 0) and NaN.

static void ref_fp8_fields(ampx_dtype dt, int *ebits, int *mbits) {
    *ebits = dt == AMPX_E4M3 ? 4 : 5;
    *mbits = dt == AMPX_E4M3 ? 3 : 2;
}

uint32_t ref_fp8_encode(ampx_dtype dt, double x) {
    int ebits, mbits;
    ref_fp8_fields(dt, &ebits, &mbits);
    int bias      = (1 << (ebits - 1)) - 1;
    uint32_t sign = signbit(x) ? 0x80u : 0u;
    if (isnan(x)) return sign | (dt == AMPX_E4M3 ? 0x7fu : 0x7eu);
    double a = fabs(x);
    if (isinf(a)) return sign | (dt == AMPX_E4M3 ? 0x7fu : 0x7cu); /* e4m3: NaN, it has no inf */
    if (a == 0.0) return sign;
    if (a < ldexp(1.0, 1 - bias)) /* subnormal: units of 2^(1 - bias - mbits) */
        return sign | (uint32_t)(a * ldexp(1.0, bias - 1 + mbits));
    int e;
    frexp(a, &e); /* leading bit exponent e - 1 */
    uint32_t mant = (uint32_t)(ldexp(a, mbits + 1 - e) - ldexp(1.0, mbits));
    return sign | ((uint32_t)(e - 1 + bias) << mbits) | mant;
}

double ref_fp8_decode(ampx_dtype dt, uint32_t c) {
    int ebits, mbits;
    ref_fp8_fields(dt, &ebits, &mbits);
    int bias      = (1 << (ebits - 1)) - 1;
    double s      = (c & 0x80u) ? -1.0 : 1.0;
    uint32_t emax = (1u << ebits) - 1, exp = (c >> mbits) & emax, mant = c & ((1u << mbits) - 1);
    if (dt == AMPX_E4M3 && exp == emax && mant == (1u << mbits) - 1) return s * NAN;
    if (dt == AMPX_E5M2 && exp == emax) return mant ? s * NAN : s * INFINITY;
    if (exp == 0) return s * ldexp((double)mant, 1 - bias - mbits);
    return s * ldexp(1.0 + ldexp((double)mant, -mbits), (int)exp - bias);
}

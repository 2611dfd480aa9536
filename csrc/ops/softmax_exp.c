/* pd_exp_array takes a group of vector width only when every input is in its range, and sends
 * a group holding a zero, or a short tail, to pd_exp one by one: in a softmax row that was most
 * of the exponentials of short rows. The zero shift is computed alone, and the tail is padded
 * with -1.0 (in range), in the row's scratch room or else in a copy, so every group stays in
 * the vector loop. */
#include "softmax_exp.h"
#include "../libm/pd_libm.h"

#define PAD 8 /* a multiple of every array path's vector width */

void pd_softmax_exp(double *p, size_t n, size_t zero, size_t room) {
    const double z = zero < n ? p[zero] : 0.0;
    if (zero < n) p[zero] = -1.0;
    const size_t padded = (n + PAD - 1) / PAD * PAD;
    if (padded - n <= room) {
        for (size_t j = n; j < padded; j++) p[j] = -1.0;
        pd_exp_array(padded, p, p);
    } else {
        const size_t body = n / PAD * PAD;
        double tail[PAD];
        for (size_t j = 0; j < PAD; j++) tail[j] = body + j < n ? p[body + j] : -1.0;
        if (body) pd_exp_array(body, p, p);
        pd_exp_array(PAD, tail, tail);
        for (size_t j = body; j < n; j++) p[j] = tail[j - body];
    }
    if (zero < n) p[zero] = pd_exp(z);
}

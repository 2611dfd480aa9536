/* Range reduction of large arguments for sin and cos */
#ifndef PD_LIBM_BRANRED_H
#define PD_LIBM_BRANRED_H

/* x = n pi/2 + (*a + *aa) for |x| >= 105414350; returns n mod 4. */
int pd_branred(double x, double *a, double *aa);

#endif

# dp_bound.py: how far the losses of two data-parallel runs over the same samples may drift when only the
# fp32 order of the gradient sums differs (W ranks vs 1, ZeRO-1 vs all-reduce, a resume at another world
# size). Derivation (first order, per element):
#  * a sum of W partial gradients in another association differs by <= (W-1) u relative, u = 2^-24
#    (same-sign terms; the grad norm and so the clip coefficient, likewise);
#  * AdamW's step lr * mhat / (sqrt(vhat) + eps) moves by <= 3 (W-1) u of its size (mhat: 1x, sqrt(vhat):
#    1x, the clip coefficient: 1x), and its size is <= A = 1 / sqrt(1 - beta2) (Cauchy-Schwarz on the EMAs);
#  * so after the steps j in [first, k) of learning rate lr_j the weights differ by <= sum_j 3 A lr_j (W-1) u
#    per element, and the loss of step k by <= |grad_k|_2 sqrt(P) times that (Cauchy-Schwarz again);
#  * plus the loss sum over ranks, added in double in another order: 1e-12 relative.
import math

U = 2.0 ** -24

def bound(base, first, k, W, P, beta2=0.95):
    """base: {iteration: metrics row with lr, grad_norm, lm_loss}; steps first..k-1 ran in another order."""
    A = 1 / math.sqrt(1 - beta2)
    drift = sum(3 * A * base[j]['lr'] * (W - 1) * U for j in range(first, k))
    return base[k]['grad_norm'] * math.sqrt(P) * drift + 1e-12 * abs(base[k]['lm_loss'])

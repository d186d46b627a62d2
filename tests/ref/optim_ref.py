"""Checks gdn.c's AdamW, LR schedule and clipping (dump from tests/test_optim.c) against
torch.optim.AdamW + LambdaLR + torch.nn.utils.clip_grad_norm_ in float64. The schedule is Megatron's
OptimizerParamScheduler: linear warmup from 0 over lr_warmup_iters, cosine to min_lr at lr_decay_iters."""
import math
import sys

import torch

torch.set_default_dtype(torch.float64)
lines = open(sys.argv[1]).read().split('\n')
n0, n1, steps = map(int, lines[0].split())
vals = lambda i: torch.tensor([float(x) for x in lines[i].split()])
p0 = vals(1)
w_decay = torch.nn.Parameter(p0[:n0].clone())
w_plain = torch.nn.Parameter(p0[n0:].clone())


def megatron_lr(done):  # noqa: E302
    if warm > 0 and done <= warm:
        return max_lr * done / warm
    if done > decay:
        return min_lr
    ratio = (done - warm) / (decay - warm)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1) * (max_lr - min_lr)


# float32 hyperparameters as the C side holds them
f32 = lambda x: torch.tensor(x, dtype=torch.float32).item()
max_lr, min_lr, warm, decay = f32(1e-2), f32(1e-3), 4, 16
opt = torch.optim.AdamW([{'params': [w_decay], 'weight_decay': f32(0.1)}, {'params': [w_plain], 'weight_decay': 0.0}],
                        lr=1.0, betas=(f32(0.9), f32(0.95)), eps=f32(1e-8))
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: megatron_lr(step))
worst, ok = 0.0, True
for s in range(steps):
    g = vals(2 + 3 * s)
    lr_c, norm_c = map(float, lines[3 + 3 * s].split())
    p_c = vals(4 + 3 * s)
    w_decay.grad, w_plain.grad = g[:n0].clone(), g[n0:].clone()
    norm = torch.nn.utils.clip_grad_norm_([w_decay, w_plain], 1.0)
    lr = opt.param_groups[0]['lr']
    if abs(lr - lr_c) > 1e-12 * max_lr or abs(norm.item() - norm_c) > 1e-6 * norm.item():
        print(f'step {s + 1}: lr {lr_c} vs {lr}, grad norm {norm_c} vs {norm.item()}')
        ok = False
    # the C side runs the update with the lr rounded to float32
    for gr in opt.param_groups:
        gr['lr'] = f32(lr)
    opt.step()
    for gr in opt.param_groups:
        gr['lr'] = lr
    sched.step()
    ref = torch.cat([w_decay.detach(), w_plain.detach()])
    err = (p_c - ref).abs().max().item() / ref.abs().max().item()
    worst = max(worst, err)
    if not err <= 2e-6:
        print(f'step {s + 1}: params differ by {err:.3e} relative')
        ok = False
print(f'optimizer: worst relative parameter error {worst:.2e} over {steps} steps (tol 2e-6, fp32 vs fp64)')
sys.exit(0 if ok else 1)

"""Module 07 (training): the mistakes learners typically make in clipping, schedules, checkpoints and the loop."""
from tito.misconceptions import Mistake

MISTAKES = [
    Mistake(
        name="norms-summed", exercise="get_total_norm",
        misconception="The global norm is the sum of the per-parameter norms: but lengths of orthogonal pieces add "
                      "in squares, so it is the p-norm of the per-parameter norms.",
        replacement="""
norms = [np.linalg.norm(v.reshape(-1), ord=norm_type) for v in values]
total = float(sum(norms))
"""),
    Mistake(
        name="rebinding-does-not-write", exercise="clip_grad_norm_",
        misconception="Scaling a name that holds the gradient scales the gradient: but `grad = grad * factor` "
                      "makes a new array, and p.grad must be given it.",
        replacement="""
factor = max_norm / (total + 1e-6)
if not factor >= 1:
    for p in params:
        grad = p.grad
        grad = grad * factor
return total
"""),
    Mistake(
        name="cosine-progress-from-zero", exercise="get_lr_cosine_schedule",
        misconception="The cosine's progress is it / cosine_cycle_iters: but the decay starts after the warm-up, "
                      "so the progress counts from warmup_iters.",
        replacement="""
if it < warmup_iters:
    return it / warmup_iters * max_learning_rate
if it <= cosine_cycle_iters and cosine_cycle_iters > warmup_iters:
    progress = it / cosine_cycle_iters
    return min_learning_rate + 0.5 * (1 + math.cos(math.pi * progress)) * (max_learning_rate - min_learning_rate)
return min_learning_rate
"""),
    Mistake(
        name="linear-progress-from-zero", exercise="get_lr_linear_schedule",
        misconception="The straight line runs from iteration 0 to decay_iters: but it starts at the end of the "
                      "warm-up, where the rate is the maximum.",
        replacement="""
if it < warmup_iters:
    return it / warmup_iters * max_learning_rate
if it <= decay_iters and decay_iters > warmup_iters:
    progress = it / decay_iters
    return max_learning_rate + progress * (min_learning_rate - max_learning_rate)
return min_learning_rate
"""),
    Mistake(
        name="warmup-off-by-one", exercise="get_lr_constant_schedule",
        misconception="Iteration 0 of the warm-up already gets 1/warmup_iters of the maximum: but the warm-up "
                      "starts at 0 and reaches the maximum at iteration warmup_iters.",
        replacement="""
if it < warmup_iters:
    return (it + 1) / warmup_iters * max_learning_rate
return max_learning_rate
"""),
    Mistake(
        name="rate-set-before-counting", exercise="LRScheduler.step",
        misconception="step() sets the current iteration's rate and then counts: but the rate set now is for the "
                      "next optimiser step, the new iteration.",
        replacement="""
self.optimizer.lr = self.lr_at(self.last_epoch)
self.last_epoch += 1
"""),
    Mistake(
        name="weights-only", exercise="_training_entries",
        misconception="A checkpoint is the model's weights: but Adam's moments and step counts are state too, and "
                      "without them the resumed run takes different steps.",
        replacement="""
for name, array in model.state_dict().items():
    entries[f"model/{name}"] = array
saved = optimizer.state_dict()
header = {"format": TRAINING_FORMAT_VERSION, "iteration": iteration, "optimizer": type(optimizer).__name__,
          "param_groups": saved["param_groups"], "state": described,
          "scheduler": None if scheduler is None else {"kind": type(scheduler).__name__,
                                                       "state": scheduler.state_dict()},
          "rng": None if rng is None else rng.bit_generator.state}
"""),
    Mistake(
        name="string-indices", exercise="_optimizer_state",
        misconception="The state can keep the header's keys: but JSON made the parameter indices strings, and "
                      "the optimiser looks its state up by int.",
        replacement="""
for index, kinds in header["state"].items():
    state[index] = entry = {}
    for key, kind in kinds.items():
        name = f"optimizer/{index}/{key}"
        if kind == "array":
            entry[key] = arrays[name]
        elif "rows" in kind:
            entry[key] = RowSparseGrad(arrays[f"{name}/indices"], arrays[f"{name}/values"], kind["rows"])
        else:
            entry[key] = kind["number"]
"""),
    Mistake(
        name="no-zero-grad", exercise="train_step",
        misconception="backward() replaces the gradients: but it adds into .grad, so without zero_grad() each step "
                      "also carries every earlier step's gradient.",
        replacement="""
loss = loss_fn(model, batch)
loss.backward()
params = [p for p in optimizer.params if p.grad is not None]
if max_grad_norm is None:
    norm = get_total_norm([p.grad for p in params])
else:
    norm = clip_grad_norm_(params, max_grad_norm)
value = loss.item()
if math.isfinite(value) and math.isfinite(norm):
    optimizer.step()
return value, norm
"""),
    Mistake(
        name="dropout-on-in-evaluation", exercise="evaluate",
        misconception="no_grad() is all an evaluation needs: but dropout still drops units, so the loss is noisy "
                      "and too high.",
        replacement="""
with no_grad():
    return float(np.mean([loss_fn(model, batch).item() for batch in batches]))
"""),
    Mistake(
        name="checkpoint-saves-this-iteration", exercise="fit",
        misconception="The checkpoint records the iteration just run: but a resumed run starts at the iteration "
                      "saved, so it must be the next one, or one step is taken twice.",
        replacement="""
for it in range(start, steps):
    lr = optimizer.lr
    loss, norm = train_step(model, optimizer, train_batch(it), loss_fn, max_grad_norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        history.stopped = _stop_message(it, loss, norm, lr, history)
        report({"step": it, "steps": steps, "loss": loss, "lr": lr, "grad_norm": norm, "eval_loss": None,
                "elapsed": time.perf_counter() - started, "stopped": history.stopped})
        break
    history.iterations.append(it)
    history.losses.append(loss)
    history.learning_rates.append(lr)
    history.grad_norms.append(norm)
    if scheduler is not None:
        scheduler.step()
    done, eval_loss = it + 1, None
    if eval_batches is not None and (done == steps or (eval_every and done % eval_every == 0)):
        eval_loss = evaluate(model, eval_batches, loss_fn)
        history.eval_iterations.append(done)
        history.eval_losses.append(eval_loss)
    if checkpoint is not None and (done == steps or (checkpoint_every and done % checkpoint_every == 0)):
        save_checkpoint(model, optimizer, it, checkpoint, scheduler, rng)
    report({"step": done, "steps": steps, "loss": loss, "lr": lr, "grad_norm": norm, "eval_loss": eval_loss,
            "elapsed": time.perf_counter() - started, "stopped": None})
"""),
]

MISTAKES.insert(0, Mistake(
    name="sparse-densified", exercise="scale_gradient",
    misconception="A RowSparseGrad can be scaled through its dense form: but that allocates the whole table and "
                  "returns a dense gradient, which the sparse optimisers refuse and which costs the table's size.",
    replacement="""
if isinstance(grad, RowSparseGrad):
    return grad.to_dense() * factor
return grad * factor
"""))

"""The portable wheel beside PyTorch (scripts/test.sh runs this where Debian's libraries are
hidden): the lazy device and torch.compile(backend="lazuli") give eager's results, with the
wheel's own copies of oneDNN and libgomp loaded beside PyTorch's OpenMP runtime."""
import pathlib

import torch

import lazuli
import lazuli.torch as lzt

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 6 * 6, 2))
x = torch.randn(2, 3, 8, 8)
expected = model(x)

compiled = torch.compile(model, backend="lazuli")
torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)

dev = lzt.device()
on_device = model.to(dev)
y = on_device(x.to(dev))
lzt.sync()
torch.testing.assert_close(y.cpu(), expected, rtol=1e-5, atol=1e-5)

libs = pathlib.Path(lazuli.__file__).parent.parent / "lazuli.libs"
mapped = {line.split()[-1] for line in open("/proc/self/maps") if ".so" in line}
bundled = sorted(p.rsplit("/", 1)[1] for p in mapped if p.startswith(str(libs) + "/"))
assert any(n.startswith("libdnnl-") for n in bundled), f"the wheel's oneDNN is not loaded: {bundled}"
print("portable wheel beside torch", torch.__version__, ": device and torch.compile match eager;",
      "loaded from lazuli.libs:", ", ".join(bundled))

// Trace catalogue: tick two ready traces and compare them (the first ticked is A).
const button = document.getElementById("compare-picked");
const picked = [];

document.querySelectorAll("input.compare-pick").forEach((box) => box.addEventListener("change", () => {
  const i = picked.indexOf(box.value);
  if (box.checked && i < 0) picked.push(box.value);
  if (!box.checked && i >= 0) picked.splice(i, 1);
  while (picked.length > 2) {
    const dropped = picked.shift(); // keep the last two ticked
    document.querySelector(`input.compare-pick[value="${dropped}"]`).checked = false;
  }
  button.disabled = picked.length !== 2;
}));

button.addEventListener("click", () => {
  if (picked.length === 2) window.location.href = `${button.dataset.url}?a=${picked[0]}&b=${picked[1]}`;
});

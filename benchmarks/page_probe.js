// Loaded into the page by the browser benchmark (benchmarks/browser.py) for one notebook cell.
//
// Records, in epoch milliseconds (performance.timeOrigin + performance.now(), comparable with
// the kernel's time.time()), into window.__ppoFeel:
//   inputs: every key down, mouse down and mouse up in the page;
//   images: every new image in the cell's figures (.ppo-figure img: a new <img>, or a new src
//           on one), with the time it appeared, the time img.decode() finished, and whether it
//           was still the one on screen then ("shown"; an image replaced before it was
//           decoded never was);
//   values: every change of a slider's readout in the cell (the value shown next to it).
// Calling it again for another cell starts afresh.
(cell) => {
  const now = () => performance.timeOrigin + performance.now();
  const feel = window.__ppoFeel || (window.__ppoFeel = {});
  if (!feel.listening) {
    feel.listening = true;
    for (const type of ["keydown", "mousedown", "mouseup"]) {
      window.addEventListener(type, () => feel.inputs.push({type, t: now()}), true);
    }
  }
  if (feel.observer) feel.observer.disconnect();
  feel.inputs = [];
  feel.images = [];
  feel.values = [];
  feel.forget = () => {
    feel.inputs = [];
    feel.images = [];
    feel.values = [];
  };
  feel.shown = () => feel.images.filter((image) => image.shown).length;
  feel.settled = () => feel.images.every((image) => image.decoded !== null);

  const sources = new WeakMap();
  const track = (img) => {
    if (!img.closest(".ppo-figure") || !img.src || sources.get(img) === img.src) return;
    const src = img.src;
    sources.set(img, src);
    const image = {t: now(), decoded: null, shown: false};
    feel.images.push(image);
    const done = () => {
      image.decoded = now();
      image.shown = img.isConnected && img.src === src;
    };
    img.decode().then(done, () => { image.decoded = now(); });
  };
  const readout = (node) => {
    const element = node.nodeType === 1 ? node : node.parentElement;
    return element && element.closest(".widget-readout");
  };
  feel.observer = new MutationObserver((records) => {
    for (const record of records) {
      const shownValue = readout(record.target);
      if (shownValue) {
        feel.values.push({t: now(), value: shownValue.textContent});
      } else if (record.type === "attributes") {
        if (record.target.tagName === "IMG") track(record.target);
      } else {
        for (const node of record.addedNodes) {
          if (node.nodeType !== 1) continue;
          if (node.tagName === "IMG") track(node);
          node.querySelectorAll("img").forEach(track);
        }
      }
    }
  });
  feel.observer.observe(cell, {
    subtree: true,
    childList: true,
    characterData: true,
    attributes: true,
    attributeFilter: ["src"],
  });
}

// Loaded into the page by the browser benchmark (benchmarks/browser.py) for one notebook cell.
//
// Records, in epoch milliseconds (performance.timeOrigin + performance.now(), comparable with
// the kernel's time.time()), into window.__ppoFeel:
//   inputs: every key down, mouse down and mouse up in the page;
//   frames: every new picture of the cell's figures (.ppo-figure), as {t, decoded, shown}:
//     - ipympl's canvas (today's figures): t when the PNG the kernel sent became the source of
//       ipympl's image, decoded when that image was drawn onto the figure's canvas in the page
//       (CanvasRenderingContext2D.drawImage), shown once the page painted it (a frame replaced
//       before the next animation frame never was);
//     - an <img> (the earlier figures): t when a new image or a new src appeared, decoded when
//       img.decode() finished, shown if it was still the one on screen then;
//   values: every change of a slider's readout in the cell (the value shown next to it).
// Calling it again for another cell starts afresh.
(cell) => {
  const now = () => performance.timeOrigin + performance.now();
  const feel = window.__ppoFeel || (window.__ppoFeel = {});
  feel.cell = cell;
  if (!feel.listening) {
    feel.listening = true;
    for (const type of ["keydown", "mousedown", "mouseup"]) {
      window.addEventListener(type, () => feel.inputs.push({type, t: now()}), true);
    }
    // ipympl: a PNG arrives as a blob URL set on an Image, which is drawn onto an offscreen
    // canvas once loaded, which is drawn onto each view's canvas in the page.
    const arrived = new WeakMap();  // image -> when its src was set
    const source = new WeakMap();  // offscreen canvas -> the image last drawn onto it
    const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, "src");
    Object.defineProperty(HTMLImageElement.prototype, "src", {
      ...src,
      set(value) {
        arrived.set(this, now());
        src.set.call(this, value);
      },
    });
    const drawImage = CanvasRenderingContext2D.prototype.drawImage;
    const painting = new Map();  // canvas -> its latest frame, until the next animation frame
    CanvasRenderingContext2D.prototype.drawImage = function (picture, ...rest) {
      const target = this.canvas;
      if (picture instanceof HTMLImageElement && !target.isConnected) {
        source.set(target, picture);
      } else if (
        picture instanceof HTMLCanvasElement && target.isConnected &&
        feel.cell && feel.cell.contains(target) && target.closest(".ppo-figure")
      ) {
        const image = source.get(picture);
        const drawn = now();
        const frame = {t: (image && arrived.get(image)) || drawn, decoded: drawn, shown: null};
        feel.frames.push(frame);
        const previous = painting.get(target);
        if (previous) previous.shown = false;
        painting.set(target, frame);
        requestAnimationFrame(() => {
          if (painting.get(target) === frame) {
            frame.shown = true;
            painting.delete(target);
          }
        });
      }
      return drawImage.call(this, picture, ...rest);
    };
  }
  if (feel.observer) feel.observer.disconnect();
  feel.forget = () => {
    feel.inputs = [];
    feel.frames = [];
    feel.values = [];
  };
  feel.forget();
  feel.shown = () => feel.frames.filter((frame) => frame.shown).length;
  feel.settled = () => feel.frames.every((frame) => frame.decoded !== null && frame.shown !== null);

  const sources = new WeakMap();
  const track = (img) => {
    if (!img.closest(".ppo-figure") || !img.src || sources.get(img) === img.src) return;
    const imageSource = img.src;
    sources.set(img, imageSource);
    const frame = {t: now(), decoded: null, shown: null};
    feel.frames.push(frame);
    const done = () => {
      frame.decoded = now();
      frame.shown = img.isConnected && img.src === imageSource;
    };
    img.decode().then(done, () => {
      frame.decoded = now();
      frame.shown = false;
    });
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

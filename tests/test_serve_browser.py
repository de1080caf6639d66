"""``nlgkit serve`` as a real process: HTTP on 127.0.0.1, the load test of ``make bench`` on a small run, and
the web page in a real headless Chromium (Selenium) that types a sentence, drops an image and reads the
answers. The browser test is skipped, saying why, only where no Chromium and chromedriver are installed
(``make browser`` installs them with apt)."""

from __future__ import annotations

import base64
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_serve import LINES, caption_run, picture, translation_run

from nlgkit.experiments.bench.serve import measure_serving, running_server, serve_lines


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("served_runs")
    return {"translation": translation_run(root / "de-en"), "captioning": caption_run(root / "captioner"),
            "narrow": translation_run(root / "narrow", beam=2)}


@pytest.fixture(scope="module")
def server(runs: dict[str, Path]) -> Iterator[str]:
    with running_server(["--model", f"de-en={runs['translation']}", "--model", f"captioner={runs['captioning']}",
                         "--model", f"narrow={runs['narrow']}", "--device", "cpu"]) as url:
        yield url


def test_a_real_server_answers_over_http(server: str) -> None:
    answer = httpx.post(f"{server}translate", json={"lines": LINES}, timeout=60)
    assert answer.status_code == 200 and len(answer.json()["translations"]) == len(LINES), answer.text
    bad = httpx.post(f"{server}caption", files={"image": ("x.jpg", b"GIF89a-not-really")}, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"].startswith("x.jpg: "), bad.text
    assert httpx.get(f"{server}health", timeout=10).json()["status"] == "ok"


def test_the_load_test_checks_every_answer_against_the_offline_command(runs: dict[str, Path], server: str) -> None:
    figures = measure_serving(str(runs["translation"]), LINES, clients=3, seconds=1.5, single=5, url=server)
    load = figures["load"]
    assert load["sent"] == load["answered"] > 0 and load["different"] == load["failed"] == 0, load
    assert figures["single"]["requests"] == 5 and figures["single"]["different"] == 0
    assert load["p50_ms"] <= load["p99_ms"]
    table = "\n".join(serve_lines(figures))
    assert f"{load['sent']} requests from 3 clients" in table and "(0 lost or failed), 0 different" in table
    assert serve_lines({"skipped": "no trained run"})[-1] == "Not measured: no trained run."


def browser() -> tuple[str, str] | None:
    """Chromium and its driver, where the machine has them."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


DROP = """
const [data, name, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
const transfer = new DataTransfer();
transfer.items.add(new File([bytes], name, {type: "image/jpeg"}));
const zone = document.getElementById("dropzone");
for (const type of ["dragenter", "dragover", "drop"]) {
  zone.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: transfer}));
}
done(true);
"""


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    found = browser()
    if found is None:
        pytest.skip("no Chromium with chromedriver on this machine (`make browser` installs them with apt)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1200,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=found[1]))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_translates_a_typed_sentence_and_captions_a_dropped_image(chrome: Any, server: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(chrome, 60)
    chrome.get(server)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#translate-model option")))
    assert "de-en" in chrome.find_element(By.ID, "served").text

    sentence = "Ein Mann fährt mit dem Fahrrad ."
    chrome.find_element(By.ID, "source").send_keys(sentence)
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#translations li.translation .hypothesis")))
    shown = [e.text for e in chrome.find_elements(By.CSS_SELECTOR, "#translations .hypothesis .text")]
    api = httpx.post(f"{server}translate", json={"lines": [sentence], "model": "de-en", "nbest": 3, "scores": True},
                     timeout=60).json()["translations"][0]
    assert shown == [h["text"] for h in api["nbest"]] and len(shown) == 3
    assert chrome.find_element(By.CSS_SELECTOR, "#translations .source").text == sentence
    assert not chrome.find_elements(By.CSS_SELECTOR, "#translations .alignment")  # only when asked

    # with "alignment" ticked, the best output's tokens under the source's; pointing at one lights up its pair
    chrome.find_element(By.ID, "align").click()
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#translations .alignment .output-tokens")))
    api = httpx.post(f"{server}translate", json={"lines": [sentence], "model": "de-en", "align": True},
                     timeout=60).json()["translations"][0]
    source_spans = chrome.find_elements(By.CSS_SELECTOR, "#translations .source-tokens .token")
    output_spans = chrome.find_elements(By.CSS_SELECTOR, "#translations .output-tokens .token")
    assert [e.text for e in source_spans] == api["source_tokens"] and [e.text for e in output_spans] == api["tokens"]
    source, output = api["alignment"][0]
    ActionChains(chrome).move_to_element(output_spans[output]).perform()
    lit = [i for i, e in enumerate(source_spans) if "linked" in e.get_attribute("class").split()]
    assert lit == [source] and "linked" in output_spans[output].get_attribute("class").split()
    assert all(not e.get_attribute("title") for e in output_spans)  # no scores asked

    # with "word scores" ticked (alignment off), each output token and the end of sentence show their probability
    chrome.find_element(By.ID, "align").click()
    chrome.find_element(By.ID, "word-scores").click()
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#translations .output-tokens .token[title]"))
    api = httpx.post(f"{server}translate", json={"lines": [sentence], "model": "de-en", "token_scores": True},
                     timeout=60).json()["translations"][0]
    output_spans = chrome.find_elements(By.CSS_SELECTOR, "#translations .output-tokens .token")
    assert not chrome.find_elements(By.CSS_SELECTOR, "#translations .source-tokens .token")
    assert [e.text for e in output_spans] == api["tokens"] + ["</s>"] * (len(api["token_scores"]) > len(api["tokens"]))
    assert [e.get_attribute("title") for e in output_spans] == [f"p = {math.exp(v):.3f}" for v in api["token_scores"]]

    # "must contain": every hypothesis holds the phrases typed (separated by ";"), as the API's "constraints"
    chrome.find_element(By.ID, "word-scores").click()
    def shown_texts(driver: Any) -> list[str]:  # read in one script: the page may replace the list meanwhile
        return driver.execute_script(
            "return [...document.querySelectorAll('#translations .hypothesis .text')].map((e) => e.textContent)")

    before = shown_texts(chrome)
    chrome.find_element(By.ID, "must-contain").send_keys("ball ; the park")
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(lambda d: shown_texts(d) not in ([], before))
    shown = shown_texts(chrome)
    api = httpx.post(f"{server}translate", json={"lines": [sentence], "model": "de-en", "nbest": 3, "scores": True,
                                                 "constraints": [["ball", "the park"]]}, timeout=60).json()
    assert shown == [h["text"] for h in api["translations"][0]["nbest"]]
    assert all(" ball " in f" {text} " and " the park " in f" {text} " for text in shown), shown
    assert chrome.find_element(By.ID, "translate-warnings").get_attribute("hidden") is not None

    # a phrase the model cannot write is left out, and the page says which and why (the API's "warnings")
    chrome.find_element(By.ID, "must-contain").send_keys(" ; Zzyzx")
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(ready.visibility_of_element_located((By.ID, "translate-warnings")))
    assert chrome.find_element(By.ID, "translate-warnings").text == (
        "line 1: constraint 'Zzyzx' left out: 'zzyzx' not in the target vocabulary")
    assert shown_texts(chrome) == shown

    # "starts with": every hypothesis begins with the words typed and the model completes it ("target_prefix")
    chrome.find_element(By.ID, "must-contain").clear()
    chrome.find_element(By.ID, "starts-with").send_keys("the woman")
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(lambda d: shown_texts(d) not in ([], shown))
    started = shown_texts(chrome)
    api = httpx.post(f"{server}translate", json={"lines": [sentence], "model": "de-en", "nbest": 3, "scores": True,
                                                 "target_prefix": ["the woman"]}, timeout=60).json()
    assert started == [h["text"] for h in api["translations"][0]["nbest"]] and len(started) == 3
    assert all(text.lower().startswith("the woman") for text in started), started
    free = httpx.post(f"{server}translate", json={"lines": [sentence], "model": "de-en", "nbest": 3},
                      timeout=60).json()["translations"][0]["nbest"]
    assert not any(h["text"].lower().startswith("the woman") for h in free)  # the words are the page's, not the model's
    assert chrome.find_element(By.ID, "translate-warnings").get_attribute("hidden") is not None

    image = picture(7)
    chrome.execute_async_script(DROP, base64.b64encode(image).decode(), "street.jpg")
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#captions .result .hypothesis")))
    wait.until(lambda d: d.execute_script(
        "const m = document.querySelector('#captions img.attention'); return m && m.complete && m.naturalWidth > 0"))
    shown = [e.text for e in chrome.find_elements(By.CSS_SELECTOR, "#captions .hypothesis .text")]
    api = httpx.post(f"{server}caption", data={"model": "captioner", "nbest": "3", "attention": "true"},
                     files={"image": ("street.jpg", image, "image/jpeg")}, timeout=60).json()["results"][0]
    assert shown == [c["text"] for c in api["captions"]]
    assert chrome.find_element(By.CSS_SELECTOR, "#captions .image-name").text == "street.jpg"
    assert chrome.find_element(By.ID, "error").get_attribute("hidden") is not None  # no error shown

    # "starts with" for captions: the form's target_prefix; a word the model cannot write is named
    def shown_captions(driver: Any) -> list[str]:
        return driver.execute_script(
            "return [...document.querySelectorAll('#captions .hypothesis .text')].map((e) => e.textContent)")

    chrome.find_element(By.ID, "caption-starts-with").send_keys("the Zzyzx")
    chrome.execute_async_script(DROP, base64.b64encode(image).decode(), "street.jpg")
    wait.until(ready.visibility_of_element_located((By.ID, "caption-warnings")))
    started = shown_captions(chrome)
    api = httpx.post(f"{server}caption", data={"model": "captioner", "nbest": "3", "target_prefix": "the Zzyzx"},
                     files={"image": ("street.jpg", image, "image/jpeg")}, timeout=60).json()
    assert started == [c["text"] for c in api["results"][0]["captions"]] and started != shown
    assert all(text.lower().startswith("the <unk>") for text in started), started
    assert chrome.find_element(By.ID, "caption-warnings").text == api["warnings"][0]


def test_the_page_asks_no_more_hypotheses_than_the_models_beam(chrome: Any, server: str) -> None:
    """The page's n-best (3 unless changed) with the Beam field left empty, on a model whose run searches with beam 2:
    the page asks for the 2 the beam has rather than showing the server's refusal of 3."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(chrome, 60)
    chrome.get(server)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "#translate-model option[value='narrow']")))
    Select(chrome.find_element(By.ID, "translate-model")).select_by_value("narrow")
    chrome.find_element(By.ID, "source").send_keys("Ein Mann fährt mit dem Fahrrad .")
    chrome.find_element(By.ID, "translate-button").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#translations .hypothesis")
               or d.find_element(By.ID, "error").get_attribute("hidden") is None)
    assert chrome.find_element(By.ID, "error").get_attribute("hidden") is not None, \
        chrome.find_element(By.ID, "error").text
    assert len(chrome.find_elements(By.CSS_SELECTOR, "#translations .hypothesis")) == 2

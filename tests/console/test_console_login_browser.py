"""`logflume console --auth-file` against a real broker, in headless Chromium: the
login page refuses a wrong password and lets the right one in; then the message
browser reads a transactional topic to its last stable offset (the page says so),
shows headers and pretty-printed JSON (and the raw value with the toggle off), and
seeks by time; a topic's configs show with their sources; a group's member with its
client id, host and assignment; logging out ends the session."""

import json
import os

from confluent_kafka.admin import AdminClient, NewTopic
from selenium.webdriver.support.ui import WebDriverWait

from console.auth import hash_password
from tests.console.browser import (
    ConsoleProcess,
    save_screenshot,
    severe_browser_logs,
    text_of,
    wait_for_text,
)
from tests.console.records import member, timed_records, transactional_records

TXN_TOPIC = "logflume-positions"
TIMED_TOPIC = "login-timed"
GROUP = "login-live"


def log_in(driver, user: str, password: str) -> None:
    driver.find_element("id", "login-user").clear()
    driver.find_element("id", "login-user").send_keys(user)
    driver.find_element("id", "login-password").clear()
    driver.find_element("id", "login-password").send_keys(password)
    driver.find_element("id", "login-submit").click()


def choose(driver, select_id: str, value: str) -> None:
    driver.execute_script(
        "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
        "s.dispatchEvent(new Event('change'));",
        select_id,
        value,
    )


def on_login_page(driver) -> bool:
    return WebDriverWait(driver, 30, poll_frequency=0.2).until(
        lambda d: d.current_url.endswith("/login") and d.find_elements("id", "login-form")
    )


def test_login_then_browse_configs_and_members(tmp_path, broker_factory, driver):
    broker = broker_factory(settings={"group.initial.rebalance.delay.ms": 0})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [NewTopic(TXN_TOPIC, 1, 1), NewTopic(TIMED_TOPIC, 1, 1, config={"retention.ms": "-1"})]
    for future in admin.create_topics(topics, operation_timeout=10).values():
        future.result(timeout=20)
    transactional_records(broker.bootstrap, TXN_TOPIC, 5)
    timed_records(broker.bootstrap, TIMED_TOPIC)
    live = member(broker.bootstrap, GROUP, TXN_TOPIC, "login-member-client")
    auth = tmp_path / "console.auth"
    auth.write_text(f"alice:{hash_password('correct horse')}\n")
    os.chmod(auth, 0o600)
    console = ConsoleProcess(
        tmp_path, "--bootstrap-server", broker.bootstrap, "--auth-file", str(auth)
    ).start()
    try:
        driver.get(console.url)
        on_login_page(driver)
        log_in(driver, "alice", "wrong horse")
        # The form's page holds the message hidden: wait for the answer's page showing it.
        shown = "const e = document.getElementById('login-error'); return !!e && !e.hidden"
        WebDriverWait(driver, 30, poll_frequency=0.2).until(lambda d: d.execute_script(shown))
        assert text_of(driver, "#login-error") == "wrong user name or password"
        assert driver.current_url.endswith("/login")
        log_in(driver, "alice", "correct horse")
        wait_for_text(driver, "#controller", "broker 0")
        wait_for_text(driver, "#session-user", "alice")

        # the group's member
        row = f'tr.member-row[data-group="{GROUP}"]'
        wait_for_text(driver, f"{row} .client-id", "login-member-client")
        assert text_of(driver, f"{row} .host") == "127.0.0.1"
        assert text_of(driver, f"{row} .assignment") == f"{TXN_TOPIC}-0"

        # a topic's configs, from a click on its name
        name = f'tr.topic-row[data-topic="{TIMED_TOPIC}"] .topic-name'
        wait_for_text(driver, name, TIMED_TOPIC)
        driver.find_element("css selector", name).click()
        config = '#cfg-table tr[data-config="retention.ms"]'
        wait_for_text(driver, f"{config} .cfg-source", "DYNAMIC_TOPIC_CONFIG")
        assert text_of(driver, f"{config} .cfg-value") == "-1"

        # the transactional topic, read to its last stable offset
        choose(driver, "mb-topic", TXN_TOPIC)
        driver.find_element("id", "mb-show").click()
        wait_for_text(
            driver, "#mb-note", lambda t: "end of partition at the last stable offset 6" in t
        )
        stopped = "return document.getElementById('mb-note').dataset.stopped"
        assert driver.execute_script(stopped) == "end"
        assert len(driver.find_elements("css selector", "#mb-table tbody tr")) == 5
        last = '#mb-table tr[data-offset="4"]'
        assert text_of(driver, f"{last} .headers") == "host=web-a"
        pretty = text_of(driver, f"{last} .value")
        assert pretty.startswith('{\n  "file": "/var/log/nginx/access.log.4",\n  "position": 400')
        driver.find_element("id", "mb-pretty").click()
        raw = wait_for_text(driver, f"{last} .value", lambda t: "\n" not in t)
        assert json.loads(raw) == json.loads(pretty)

        # seek by time: the first record at or after 07:00:06.5 is offset 7
        choose(driver, "mb-topic", TIMED_TOPIC)
        choose(driver, "mb-from", "timestamp")
        driver.find_element("id", "mb-at").send_keys("2026-11-29T07:00:06.500Z")
        driver.find_element("id", "mb-n").clear()
        driver.find_element("id", "mb-n").send_keys("2")
        driver.find_element("id", "mb-show").click()
        wait_for_text(driver, "#mb-table tbody tr:first-child .offset", "7")
        assert text_of(driver, "#mb-table tr[data-offset='7'] .timestamp") == (
            "2026-11-29T07:00:07.000Z"
        )
        assert len(driver.find_elements("css selector", "#mb-table tbody tr")) == 2
        save_screenshot(driver, tmp_path, "console-login.png")

        driver.find_element("id", "logout").click()
        on_login_page(driver)
        driver.get(console.url + "api/cluster")
        assert "login required" in driver.page_source
        assert [e for e in severe_browser_logs(driver) if "api/cluster" not in e["message"]] == []
    finally:
        console.stop()
        live.close()
    assert console.proc.returncode == 0, console.log_text()

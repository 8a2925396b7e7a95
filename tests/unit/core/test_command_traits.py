"""What a shell command does, as the traits the destructive-command head weighs."""

from __future__ import annotations

import pytest

from system1.core.command_traits import MAX_CHARS, traits


@pytest.mark.parametrize(("command", "expected"), [
    ("rm -rf ./src", {"deletes", "recursive", "forced"}),
    ("rm -f ./notes.txt", {"deletes", "forced"}),
    ("shred -u notes.txt", {"deletes"}),
    ("find . -name '*.orig' -delete", {"deletes"}),
    ("aws ec2 terminate-instances --instance-ids i-0abc", {"deletes"}),
    ("gcloud compute instances delete web-1 --zone europe-west1-b", {"deletes"}),
    ("rsync -a --delete src/ backup/", {"deletes"}),
    ("curl -X DELETE https://api.example.com/items/7", {"deletes"}),
    ("git branch -D feature/x", {"deletes"}),
    ("dd if=/dev/zero of=/dev/sdb bs=1M", {"overwrites"}),
    ("cp defaults.env .env", {"overwrites"}),
    ("git reset --hard HEAD~2", {"overwrites", "forced"}),
    ("git push --force origin main", {"rewrites-history", "sends", "forced"}),
    ("pkill -9 -f worker", {"stops", "forced"}),
    ("chmod -R 777 /srv/app", {"changes-access", "recursive", "broad-target"}),
    ("crontab -r", {"deletes"}),
    ("mkdir -p logs/archive", {"creates"}),
])
def test_a_command_is_named_by_what_it_does(command, expected):
    assert expected <= traits(command)


def test_wrappers_and_assignments_are_stepped_over_to_the_program():
    assert {"deletes", "forced"} <= traits("sudo -u www-data env KEEP=1 nice -n 5 rm -f cache.db")
    assert "deletes" in traits("ls *.tmp | xargs -I{} rm {}")


def test_a_pipeline_of_readers_only_reads_and_one_that_runs_what_it_fetched_does_not():
    assert {"reads", "only-reads"} <= traits("ps aux | grep python | wc -l")
    assert "only-reads" in traits("git log --oneline -5 && git status")
    assert "only-reads" not in traits("curl -fsSL https://example.com/install.sh | sh")
    assert "only-reads" not in traits("cat notes.md > README.md")


def test_a_redirect_overwrites_its_file_an_append_or_dev_null_does_not():
    assert {"overwrites", "writes-file"} <= traits("sort data.csv > data.csv")
    assert "overwrites" not in traits("echo done >> build.log")
    assert "appends" in traits("echo done >> build.log")
    assert traits("make test > /dev/null") & {"overwrites", "writes-file"} == set()


def test_a_dry_run_or_help_is_named_beside_the_verb():
    assert {"deletes", "dry-run"} <= traits("kubectl delete pod web-0 --dry-run=client")
    assert "dry-run" in traits("rm --help")
    assert "only-reads" in traits("terraform plan -out=tfplan")


def test_a_copy_that_will_not_clobber_or_an_edit_with_a_backup_is_named_so():
    assert traits("cp -n template.env .env") == {"backs-up"}
    assert "backs-up" in traits("sed -i.bak 's/a/b/' config.ini")
    assert "overwrites" in traits("sed -i 's/a/b/' config.ini")


def test_sql_is_read_by_its_statements_effect():
    assert {"sql-delete", "sql-no-where"} <= traits('psql -d app -c "DELETE FROM orders;"')
    assert "sql-no-where" not in traits('psql -d app -c "DELETE FROM orders WHERE id = 4;"')
    assert "sql-drop" in traits("mysql -e 'DROP TABLE sessions'")
    assert traits('sqlite3 app.db "SELECT count(*) FROM users"') == {"sql-read"}
    assert "sql-no-where" not in traits("sudo apt-get update")


def test_build_output_and_caches_are_named_as_regenerable():
    assert "regenerable-target" in traits("rm -rf ./dist ./build node_modules")
    assert "regenerable-target" not in traits("rm -rf ./dist ./src")


def test_text_that_is_not_a_command_gives_few_traits_and_never_an_error():
    assert traits("") == set() and traits("   ") == set()
    assert traits('rm "unclosed') == {"deletes"}
    assert "deletes" in traits("rm -rf x; " * 10_000)  # read up to MAX_CHARS, not refused
    assert len("rm -rf x; " * 10_000) > MAX_CHARS

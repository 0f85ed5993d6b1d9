# bash completion for normbench (installed as share/bash-completion/completions/normbench).
#
# Nothing here lists normbench's commands, options, tasks, norms or datasets: they come from
# the binary being completed, so they cannot drift from it. The commands, tasks, norms and
# datasets from `normbench __complete commands|tasks|norms|datasets [TASK]|registry`; each command's options,
# which of them take a value and their choices from its --help (for run, from
# `normbench help run TASK` once the task is typed: the common options and that task's own).
# tests/cli/78-install.t calls _normbench with COMP_WORDS set, as bash does.

# The options of a help text, one per line as "--name META a b c" (META "-" for a flag; the
# choices from a trailing "(a|b|c)"): from its option table, where a line indented far continues
# the one above, and from its usage lines ("[--jobs N]"), for the options only they name.
_normbench_opts() {
    local line opt meta choices usage=1 joined= seen=" "
    local -a lines=() rows=()
    while IFS= read -r line; do
        if ((usage)); then
            [[ -z $line ]] && { usage=0; continue; }
            while [[ $line =~ --([a-z0-9-]+)(\ ([A-Z][A-Za-z|]*))?(.*)$ ]]; do
                rows+=("--${BASH_REMATCH[1]} ${BASH_REMATCH[3]:--} ")
                line=${BASH_REMATCH[4]}
            done
            continue
        fi
        if [[ $line =~ ^\ {10,}(.*)$ && -n $joined ]]; then
            joined+=" ${BASH_REMATCH[1]}"
            continue
        fi
        [[ -n $joined ]] && lines+=("$joined")
        joined=$line
    done
    [[ -n $joined ]] && lines+=("$joined")
    for line in "${lines[@]}"; do
        [[ $line =~ ^\ {2}(--[a-z0-9-]+)(\ ([A-Za-z][^\ ]*))?\ {2,}.*$ ]] || continue
        opt=${BASH_REMATCH[1]} meta=${BASH_REMATCH[3]} choices=
        if [[ $line =~ \(([a-z0-9+-]+(\|[a-z0-9+-]+)+)\)(\;\ default\ .*)?$ ]]; then
            choices=${BASH_REMATCH[1]//|/ }
        fi
        printf '%s %s %s\n' "$opt" "${meta:--}" "$choices"
        seen+="$opt "
    done
    for line in "${rows[@]}"; do
        [[ $seen == *" ${line%% *} "* ]] && continue
        seen+="${line%% *} "
        printf '%s\n' "$line"
    done
}

_normbench() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local nb=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]:-} i w task= sub=
    COMPREPLY=()
    if ((COMP_CWORD == 1)); then
        mapfile -t COMPREPLY < <(compgen -W "$("$nb" __complete commands 2>/dev/null) --help --version" -- "$cur")
        return 0
    fi
    if [[ $cmd == help ]]; then
        if ((COMP_CWORD == 2)); then
            mapfile -t COMPREPLY < <(compgen -W "$("$nb" __complete commands 2>/dev/null)" -- "$cur")
        elif ((COMP_CWORD == 3)) && [[ ${COMP_WORDS[2]} == run ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$("$nb" __complete tasks 2>/dev/null)" -- "$cur")
        fi
        return 0
    fi

    # the options of this command line, and whether the option before the cursor wants a value
    local table
    # the positional words typed so far (a value after an option that takes one is not one)
    local -a pos=()
    table=$("$nb" "$cmd" --help 2>/dev/null | _normbench_opts)
    for ((i = 2; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == --*=* ]]; then continue; fi
        if [[ $w == -* ]]; then
            # skip the value of an option that takes one
            if grep -q -- "^$w [^-]" <<<"$table"; then ((i++)); fi
            continue
        fi
        pos+=("$w")
    done
    case $cmd in
    run | sweep) task=${pos[0]:-} ;;
    bench) sub=${pos[0]:-} task=${pos[1]:-} ;;
    esac
    if [[ $cmd == run && -n $task ]]; then
        table=$("$nb" help run "$task" 2>/dev/null | _normbench_opts)
    elif [[ $cmd == sweep ]]; then # its own options, then run's (the task's when it is typed)
        table=$({ "$nb" sweep --help; echo; "$nb" help run ${task:+"$task"}; } 2>/dev/null |
            _normbench_opts | awk '!seen[$1]++')
    fi

    local opt=$prev val=$cur
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*} val=${cur#*=}
    fi
    local row meta choices
    row=$(grep -- "^$opt " <<<"$table" | head -n 1)
    if [[ -n $row && $opt == -* ]]; then
        read -r _ meta choices <<<"$row"
    fi
    if [[ -n ${meta:-} && $meta != - ]]; then
        local words=
        case $opt in
        --norm) words=$("$nb" __complete norms 2>/dev/null) ;;
        --norms) words="$("$nb" __complete norms 2>/dev/null) all" ;;
        --task) words=$("$nb" __complete tasks 2>/dev/null) ;;
        --dataset)
            if [[ -n $task ]]; then
                words=$("$nb" __complete datasets "$task" 2>/dev/null)
            else
                words=$("$nb" __complete datasets 2>/dev/null)
            fi
            ;;
        --db | --out | --from)
            mapfile -t COMPREPLY < <(compgen -f -- "$val")
            compopt -o filenames 2>/dev/null
            return 0
            ;;
        --data-dir)
            mapfile -t COMPREPLY < <(compgen -d -- "$val")
            compopt -o filenames 2>/dev/null
            return 0
            ;;
        *) words=$choices ;;
        esac
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$val")
        return 0
    fi

    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(cut -d ' ' -f 1 <<<"$table") --help" -- "$cur")
        return 0
    fi
    # positional arguments
    case $cmd in
    run | sweep)
        ((${#pos[@]} == 0)) && mapfile -t COMPREPLY < <(compgen -W "$("$nb" __complete tasks 2>/dev/null)" -- "$cur")
        ;;
    bench)
        if ((${#pos[@]} == 0)); then
            mapfile -t COMPREPLY < <(compgen -W "kernels step" -- "$cur")
        elif ((${#pos[@]} == 1)) && [[ $sub == step ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$("$nb" __complete tasks 2>/dev/null)" -- "$cur")
        fi
        ;;
    fetch)
        ((${#pos[@]} == 0)) && mapfile -t COMPREPLY < <(compgen -W "$("$nb" __complete registry 2>/dev/null)" -- "$cur")
        ;;
    esac
    return 0
}
complete -F _normbench normbench
